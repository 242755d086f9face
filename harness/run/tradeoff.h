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

#include "harness/pipeline.h"
#include "harness/run/case_runner.h"

namespace tp {

// Another implementation doing the same work (LibTorch's ops), measured beside the policies:
// its time and its error against the same reference, with no per-layer profile.
struct TradeoffPeer {
  std::string name;  // "LibTorch CPU f32"
  GraphRunner run;  // empty: the peer is unavailable here (its row says why)
};

struct TradeoffOptions {
  std::string model = "tiny-kl";     // built-in name or diffusers folder
  std::string pipeline = "vae.decode";
  std::vector<std::string> policies;  // empty: every supported w x a with acc=f32
  std::vector<std::pair<int64_t, int64_t>> resolutions{{256, 256}};
  int repeats = 3;                    // timed runs after the warm-up (the captured run); the median is reported
  std::string device = "cpu";
  std::function<void(const std::string&)> progress;  // one line per finished measurement
  std::function<Expected<std::vector<TradeoffPeer>>(const Model&)> make_peers;  // optional
};

struct PolicyPoint {
  std::string policy, resolution;  // for a peer, policy is the peer's name
  bool peer = false;
  bool ran = false;
  std::string note;                  // why it did not run, or what failed
  double rel_l2 = 0, max_abs = 0;
  double psnr_db = 0;                // decoded images in 8-bit space; inf when identical, 0 for latents
  int64_t non_finite = 0;
  double seconds_median = 0, seconds_min = 0;
  int repeats = 0;
  int64_t peak_arena_bytes = 0, weight_bytes = 0;
  std::vector<double> layer_rel_l2, layer_local_rel_l2;  // per TradeoffResolution::layers (NaN: absent)
  std::vector<std::string> worst_layers;  // by local error over its tolerance, worst first
};

struct TradeoffResolution {
  std::string resolution;
  std::vector<std::string> layers;     // checkpoints in execution order
  std::vector<double> f16_headroom;    // 65504 / max|reference| per layer (< 1: overflows f16)
  double reference_seconds = 0;
};

struct Tradeoff {
  std::string model, pipeline, device;
  int repeats = 0;
  std::vector<TradeoffResolution> resolutions;
  std::vector<PolicyPoint> points;  // resolution-major, policies in order
};

// Every supported policy (w x a, acc=f32) by the harness's support table, coarsest last.
std::vector<std::string> default_tradeoff_policies();

Expected<Tradeoff> measure_tradeoff(const TradeoffOptions& options);

// Peak signal-to-noise ratio of two images in [-1, 1] after mapping both to 8-bit values as an
// image processor does (round((x + 1) / 2 * 255), clamped): inf when the bytes are equal.
double psnr_8bit(const Tensor& got, const Tensor& want);

}  // namespace tp
