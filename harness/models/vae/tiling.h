// Tiled encode/decode with diffusers' exact semantics (AutoencoderKL: tiles cropped and blended
// in place with linear ramps; AutoencoderTiny: mask blending into a zero-initialised fp32
// output). This is the plain implementation the reference paths use; the compiled path has its
// own (streamed_tiling.cpp), so a wrong threshold or blend in either shows up as a diff.
#pragma once

#include <string>

#include "harness/models/vae/pipeline.h"

namespace tp {

// Everything tiling needs, derived in one place from the config and options (the lesson of
// field report 4: threshold and loop sizes come from the same numbers).
struct TileGeometry {
  bool masks = false;  // VaeTilingStyle::masks
  int64_t ratio = 8;   // image pixels per latent pixel
  int64_t sample_min = 0, latent_min = 0;
  int64_t encode_stride = 0;  // pixels between encode tiles
  int64_t decode_stride = 0;  // latents between decode tiles
  int64_t encode_blend = 0;   // latents blended between encode tiles (Tiny: pixels)
  int64_t decode_blend = 0;   // pixels blended between decode tiles (Tiny: latents)
};
Expected<TileGeometry> tile_geometry(const VaeConfig& config, const TilingOptions& options);

// Whether diffusers tiles this input: KL when the image exceeds sample_min (encode) or the
// latent exceeds latent_min (decode) in either dimension, strictly; Tiny whenever enabled.
bool tiling_engages(const TileGeometry& g, Pipeline stage, const Shape& input);

// The rows and columns of a pipeline's output that lie in a blend band between tiles (where
// diffusers' blend_v / blend_h ramps, or AutoencoderTiny's masks, mix two tiles); a roundtrip's
// bands are its encode bands (scaled to pixels) and its decode bands. All false when the input
// does not tile (SeamBands, family.h).
SeamBands seam_bands(const TileGeometry& g, Pipeline pipeline, const Shape& input);

// The sizes (height, width) around each (threshold, stride) pair in pixels, q pixels to a latent:
// one latent under, at and over the threshold and the stride boundaries where the tile count
// changes (S, S + q, 2S, 2S + q), each along the height with the width at the threshold and the
// other way round (Family::tiling_points).
std::vector<std::pair<int64_t, int64_t>> points_around_thresholds(
    const std::vector<std::pair<int64_t, int64_t>>& thresholds, int64_t q);

// vae.encode / vae.decode / vae.roundtrip tiled per `options` (enabled), every tile kept, each
// run on `executor`: the reference paths' tiler.
Expected<NamedTensors> run_plain_tiled(const Model& model, Pipeline p, const Tensor& input,
                                       GraphExecutor& executor, const TilingOptions& options);

}  // namespace tp
