#include "harness/core/rotary.h"

#include <cmath>

namespace tp {

RotaryTables rotary_tables(const std::vector<int64_t>& axis_dims, double theta, int64_t frames,
                           int64_t height, int64_t width) {
  RotaryTables t;
  t.tokens = frames * height * width;
  // Each pair's axis (0 frame, 1 height, 2 width) and inverse frequency, in float64.
  std::vector<int> axis;
  std::vector<double> inverse;
  for (std::size_t a = 0; a < axis_dims.size(); ++a)
    for (int64_t k = 0; k < axis_dims[a] / 2; ++k) {
      axis.push_back(int(a));
      inverse.push_back(1.0 / std::pow(theta, double(2 * k) / double(axis_dims[a])));
    }
  t.pairs = int64_t(axis.size());
  t.cos.resize(std::size_t(t.tokens * t.pairs));
  t.sin.resize(t.cos.size());
  std::size_t n = 0;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t h = 0; h < height; ++h)
      for (int64_t w = 0; w < width; ++w) {
        const int64_t position[3] = {f, h, w};
        for (std::size_t i = 0; i < axis.size(); ++i, ++n) {
          const double angle = double(position[axis[i]]) * inverse[i];
          t.cos[n] = float(std::cos(angle));
          t.sin[n] = float(std::sin(angle));
        }
      }
  return t;
}

}  // namespace tp
