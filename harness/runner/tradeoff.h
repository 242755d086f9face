// The precision/performance tradeoff (`twinpath tradeoff`): one model and pipeline under many
// dtype policies and resolutions. Error per policy against the fp32 reference (final-output
// relative L2, max abs, PSNR of decoded images in 8-bit space, per-layer accumulated and local
// error, the worst layers) and cost (median time per run after a warm-up, arena peak, weight
// bytes). Every policy sees the same input: a procedural real-image-like picture (decoders get
// the reference encoder's latents of it).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness/models/model.h"
#include "harness/runner/case_runner.h"
#include "reports/tradeoff_result.h"

namespace tp {

// Another implementation doing the same work (LibTorch's ops), measured beside the policies:
// its time and its error against the same reference, with no per-layer profile.
struct TradeoffPeer {
  std::string name;  // "LibTorch CPU f32"
  GraphRunner run;   // empty: the peer is unavailable here (its row says why)
};

struct TradeoffOptions {
  std::string model = "tiny-kl";  // built-in name or diffusers folder
  std::string pipeline;           // "": the family's (PipelineDescriptor::tradeoff_default)
  // The pipeline's family options as a case's (steps=, vae=, ...), checked by
  // set_pipeline_option.
  OptionValues options;
  std::vector<std::string> policies;  // empty: default_tradeoff_policies()
  std::vector<std::pair<int64_t, int64_t>> resolutions{{256, 256}};
  int repeats = 3;  // timed runs after the warm-up (the captured run); the median is reported
  compiled::Device device = compiled::Device::kCpu;
  int64_t memory_budget = 0;  // bytes a point may use; 0: the machine's available memory less 10%
  std::function<void(const std::string&)> progress;  // one line per finished measurement
  std::function<Expected<std::vector<TradeoffPeer>>(const Model&)> make_peers;  // optional
};

// Every supported policy (w x a, acc=f32) by the harness's support table, coarsest last; for
// w = a = f16 or bf16 also with attn=act (attention's operands in that dtype).
std::vector<std::string> default_tradeoff_policies();

Expected<Tradeoff> measure_tradeoff(const TradeoffOptions& options);

// Peak signal-to-noise ratio of two images in [-1, 1] after mapping both to 8-bit values as an
// image processor does (round((x + 1) / 2 * 255), clamped): inf when the bytes are equal.
double psnr_8bit(const Tensor& got, const Tensor& want);

}  // namespace tp
