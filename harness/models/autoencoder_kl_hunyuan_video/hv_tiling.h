// AutoencoderKLHunyuanVideo's tiling in space (use_tiling) and in time (use_framewise_encoding/
// decoding, on by default) with diffusers' semantics (video-vae-facts 6): the sizes and the
// engage rule in one place (HvTiles), the reference paths' plain tiler (hv_plain_tiling.cpp: in
// double, every tile kept and blended in place as upstream) and the compiled path's streamed one
// (hv_streamed_tiling.cpp: tiles streamed, blends rounded to the activation dtype, each stage's
// decision recorded), written apart so a wrong threshold, blend or crop in either shows.
#pragma once

#include <functional>

#include "harness/models/autoencoder_kl_hunyuan_video/hv_config.h"
#include "harness/models/family.h"

namespace tp {

enum class HvStage { kEncode, kDecode };

// diffusers' tile sizes: min and stride in sample pixels (height and width alike) and in video
// frames, and what follows from them.
struct HvTiles {
  bool spatial = false;   // use_tiling
  bool framewise = true;  // use_framewise_encoding and use_framewise_decoding
  int64_t ratio = 8, frames_ratio = 4;
  int64_t min_px = 256, stride_px = 192, min_frames = 16, stride_frames = 12;

  int64_t latent_min() const { return min_px / ratio; }
  int64_t latent_stride() const { return stride_px / ratio; }
  int64_t latent_min_frames() const { return min_frames / frames_ratio; }
  int64_t latent_stride_frames() const { return stride_frames / frames_ratio; }
  // The rule (_encode / _decode): an encode compares the video's frames and pixels with the
  // sample sizes; a decode its latent frames and pixels with the min sizes over the ratios.
  // Strictly greater; in time first, and a temporal tile is then tiled in space by the same test.
  bool in_time(HvStage stage, const Shape& input) const;
  bool in_space(HvStage stage, const Shape& input) const;
  // The frames a temporal tile reads (one more than the min: the causal overlap) and steps by,
  // in the stage's input frames.
  int64_t time_tile(HvStage stage) const;
  int64_t time_step(HvStage stage) const;
};

// From the config and options (zero sizes: diffusers' 256/192 px and 16/12 frames); sizes the
// compression does not divide, or a stride over the min, are refused with what to give instead.
Expected<HvTiles> hv_tiles(const HunyuanVideoVaeConfig& config, const TilingOptions& options);

// The output's blend bands (frames, rows, columns) of `pipeline` ("video.encode", ...) on
// `input`, as the rule tiles it.
SeamBands hv_seam_bands(const HvTiles& tiles, const HunyuanVideoVaeConfig& config, bool encode,
                        bool decode, const Shape& input);

// The encode / decode graphs over a whole input (mean and logvar; sample), and a roundtrip as a
// chained pipeline (co-resident on the compiled path; `stage_outputs` adds "encoder.*").
Expected<NamedTensors> run_hv_whole(const Model& model, HvStage first, bool roundtrip,
                                    const Tensor& input, GraphExecutor& executor,
                                    bool stage_outputs);

// One stage over a whole input (or tile): the encoder's moments, or the decoded video.
Expected<Tensor> run_hv_stage_whole(const Model& model, GraphExecutor& executor, HvStage stage,
                                    const Tensor& input);

// An encode (the moments blended, then the posterior's chunk and clamp: `posterior`), a decode,
// or (`roundtrip`) an encode then a decode of the mean, each stage through a tiler's `stage`;
// `stage_outputs` adds the roundtrip's posterior as "encoder.*", as run_hv_whole does.
using HvStageRunner = std::function<Expected<Tensor>(HvStage, const Tensor&)>;
Expected<NamedTensors> run_hv_stages(HvStage first, bool roundtrip, const Tensor& input,
                                     const HvStageRunner& stage,
                                     const std::function<NamedTensors(const Tensor&)>& posterior,
                                     bool stage_outputs);

// The tilers: an encode, a decode, or (`roundtrip`) an encode then a decode of the mean. The
// streamed one runs the whole graphs (run_hv_whole) when it tiles no stage.
Expected<NamedTensors> run_hv_plain_tiled(const Model& model, HvStage first, bool roundtrip,
                                          const Tensor& input, GraphExecutor& executor,
                                          const HvTiles& tiles, bool stage_outputs);
Expected<NamedTensors> run_hv_streamed_tiled(const Model& model, HvStage first, bool roundtrip,
                                             const Tensor& input, GraphExecutor& executor,
                                             const TilingOptions& options, bool stage_outputs);

}  // namespace tp
