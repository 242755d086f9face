// The compiled path's blended tiling over an input's last two axes (AutoencoderKL's and the
// video VAEs' tiled_encode / tiled_decode, diffusers' blend_v / blend_h), streamed: tiles run
// row by row, each blended in place into its upper and left neighbours' last rows and columns
// (only the previous row is kept), cropped and written out. Every axis before the last two is
// carried along (a video's frames blend together, as upstream's 5-D slices do). Blends compute
// in fp32 and round once to the tile output's dtype.
#pragma once

#include <functional>

#include "harness/core/status.h"
#include "harness/core/tensor.h"

namespace tp {

struct BlendedGrid {
  int64_t size = 0;    // tile extent in the input, per axis
  int64_t stride = 0;  // input elements between tiles
  int64_t blend = 0;   // output elements blended between neighbours
  int64_t keep = 0;    // output elements kept per tile
};

// Runs `run_tile` on each tile of `x` (f32, rank >= 3; tiles clipped at the far edges), and
// returns the blended output in the tiles' dtype, uncropped: its last two axes are the kept
// parts' sums. `rows` and `cols` receive the grid's size.
Expected<Tensor> stream_blended_tiles(
    const Tensor& x, const std::function<Expected<Tensor>(const Tensor&)>& run_tile,
    const BlendedGrid& grid, int64_t* rows, int64_t* cols);

}  // namespace tp
