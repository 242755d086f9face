// Small comparison helpers for tests (the harness's full comparison comes with issue 4).
#pragma once

#include <cmath>
#include <string>

#include "harness/core/tensor.h"

namespace tp::testing {

// ||a - b|| / ||b||, in double. Shapes must match (returns +inf otherwise).
inline double relative_l2(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const Tensor x = a.to(DType::kF64), y = b.to(DType::kF64);
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double d = x.data<double>()[i] - y.data<double>()[i];
    num += d * d;
    den += y.data<double>()[i] * y.data<double>()[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

inline double max_abs(const Tensor& a) {
  const Tensor x = a.to(DType::kF64);
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::abs(x.data<double>()[i]));
  return m;
}

}  // namespace tp::testing
