#include "harness/core/png_io.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/core/atomic_file.h"

namespace tp {

Expected<Tensor> read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    return Error(path + ": not a readable PNG (" + image.message + ")");
  image.format = PNG_FORMAT_RGB;
  std::vector<png_byte> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    return Error(path + ": the PNG is damaged (" + why + ")");
  }
  const int64_t h = image.height, w = image.width;
  Tensor t(DType::kF32, {1, 3, h, w});
  float* d = t.data<float>();
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c)
        d[(c * h + y) * w + x] = float(pixels[std::size_t((y * w + x) * 3 + c)] / 255.0 * 2 - 1);
  return t;
}

Status write_png(const std::string& path, const Tensor& image) {
  if (image.rank() != 4 || image.dim(0) != 1 || image.dim(1) != 3)
    return Error(path + ": a PNG holds one RGB image [1,3,H,W], not " +
                 shape_string(image.shape()) + "; write .safetensors or .npy");
  const Tensor f = image.to(DType::kF32);
  const int64_t h = image.dim(2), w = image.dim(3);
  std::vector<png_byte> pixels(std::size_t(h * w * 3));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        const float v = f.data<float>()[(c * h + y) * w + x];
        const double unit = std::isnan(v) ? 0 : std::clamp(v / 2.0 + 0.5, 0.0, 1.0);
        pixels[std::size_t((y * w + x) * 3 + c)] = png_byte(std::lround(unit * 255));
      }
  return write_path_atomically(path, [&](const std::string& tmp) -> Status {
    png_image out{};
    out.version = PNG_IMAGE_VERSION;
    out.width = png_uint_32(w);
    out.height = png_uint_32(h);
    out.format = PNG_FORMAT_RGB;
    if (!png_image_write_to_file(&out, tmp.c_str(), 0, pixels.data(), 0, nullptr))
      return Error("cannot write " + path + " (" + out.message + ")");
    return Status();
  });
}

}  // namespace tp
