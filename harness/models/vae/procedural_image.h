// Real-image-like test pictures, generated from a seed: a smooth background (a few low-frequency
// waves per channel), flat shapes with hard edges in saturated colours (channels at -1 or +1,
// as sky, signs and clothing reach in photos), and a little sensor noise. What a VAE sees in
// practice (large flat regions, sharp edges, values at the range ends) and uniform noise is not.
#pragma once

#include <cstdint>

#include "harness/core/tensor.h"

namespace tp {

// A [1, channels, height, width] f32 image in the image processor's [-1, 1].
Tensor procedural_image(uint64_t seed, int64_t channels, int64_t height, int64_t width);

}  // namespace tp
