// What `twinpath tradeoff` measured (harness/runner/tradeoff.h fills it; the tradeoff report
// writes it): error and cost per dtype policy and resolution.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tp {

struct PolicyPoint {
  std::string policy, resolution;  // for a peer, policy is the peer's name
  bool peer = false;
  bool ran = false;
  std::string note;  // why it did not run, or what failed
  double rel_l2 = 0, max_abs = 0;
  double psnr_db = 0;  // decoded images in 8-bit space; inf when identical, 0 for latents
  int64_t non_finite = 0;
  double seconds_median = 0, seconds_min = 0, seconds_max = 0;  // over the timed repeats
  int repeats = 0;
  int64_t peak_arena_bytes = 0, weight_bytes = 0;
  std::vector<double> layer_rel_l2,
      layer_local_rel_l2;                 // per TradeoffResolution::layers (NaN: absent)
  std::vector<std::string> worst_layers;  // by local error over its tolerance, worst first
  // Where a point's time went besides the timed runs (progress lines only, not the report): the
  // capturing run, and the layer-by-layer scoring (each group alone, every comparison).
  double capture_seconds = 0, score_seconds = 0;
};

struct TradeoffResolution {
  std::string resolution;
  std::vector<std::string> layers;   // checkpoints in execution order
  std::vector<double> f16_headroom;  // 65504 / max|reference| per layer (< 1: overflows f16)
  double reference_seconds = 0;
};

struct Tradeoff {
  std::string model, pipeline, device;
  bool image_output = true;  // the pipeline's output is an image in [-1, 1] (PSNR applies)
  int repeats = 0;
  std::vector<TradeoffResolution> resolutions;
  std::vector<PolicyPoint> points;  // resolution-major, policies in order
};

}  // namespace tp
