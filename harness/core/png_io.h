// PNG images as pipeline tensors, the way diffusers' VaeImageProcessor maps them: 8-bit RGB to
// [1, 3, H, W] f32 in [-1, 1] (x / 255 * 2 - 1), and back ((x / 2 + 0.5) clamped to [0, 1],
// times 255, rounded). Grey and alpha are converted to RGB by libpng.
#pragma once

#include <string>

#include "harness/core/status.h"
#include "harness/core/tensor.h"

namespace tp {

Expected<Tensor> read_png(const std::string& path);
// `image` [1, 3, H, W] in [-1, 1], written atomically.
Status write_png(const std::string& path, const Tensor& image);

}  // namespace tp
