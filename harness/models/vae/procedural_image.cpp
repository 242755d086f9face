#include "harness/models/vae/procedural_image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/core/rng.h"

namespace tp {

Tensor procedural_image(uint64_t seed, int64_t channels, int64_t height, int64_t width) {
  Rng rng(seed, "procedural-image");
  Tensor t(DType::kF32, {1, channels, height, width});
  float* d = t.data<float>();
  const double h = double(height), w = double(width);
  // Background: three waves per channel, one to three periods across the image.
  for (int64_t c = 0; c < channels; ++c) {
    double fy[3], fx[3], phase[3], amp[3];
    for (int k = 0; k < 3; ++k) {
      fy[k] = rng.uniform(0.5, 3) * 2 * M_PI / h;
      fx[k] = rng.uniform(0.5, 3) * 2 * M_PI / w;
      phase[k] = rng.uniform(0, 2 * M_PI);
      amp[k] = rng.uniform(0.1, 0.3);
    }
    const double offset = rng.uniform(-0.3, 0.3);
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x) {
        double v = offset;
        for (int k = 0; k < 3; ++k)
          v += amp[k] * std::sin(fy[k] * double(y) + fx[k] * double(x) + phase[k]);
        d[(c * height + y) * width + x] = float(v);
      }
  }
  // Shapes: rectangles and discs, each a saturated colour (every channel at -1 or +1).
  const int shapes = 3 + int(rng.next() % 4);
  for (int s = 0; s < shapes; ++s) {
    const bool disc = rng.next() % 2 == 0;
    const double cy = rng.uniform(0, h), cx = rng.uniform(0, w);
    const double ry = rng.uniform(0.08, 0.3) * h, rx = disc ? ry : rng.uniform(0.08, 0.3) * w;
    std::vector<float> colour(static_cast<std::size_t>(channels));
    for (float& v : colour) v = rng.next() % 2 ? 1.0f : -1.0f;
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x) {
        const double dy = (double(y) - cy) / ry, dx = (double(x) - cx) / rx;
        const bool inside = disc ? dy * dy + dx * dx <= 1 : std::abs(dy) <= 1 && std::abs(dx) <= 1;
        if (inside)
          for (int64_t c = 0; c < channels; ++c)
            d[(c * height + y) * width + x] = colour[std::size_t(c)];
      }
  }
  // Noise: about 1% of the range (Box-Muller), then clamped to the image range.
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double u1 = 1 - rng.uniform(), u2 = rng.uniform();
    const double n = 0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    d[i] = std::clamp(float(d[i] + n), -1.0f, 1.0f);
  }
  return t;
}

}  // namespace tp
