// Small comparison helpers for tests (the harness's full comparison comes with issue 4).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "harness/core/compare.h"
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

// max |a - b| (shapes must match; +inf otherwise).
inline double max_abs_difference(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  const Tensor x = a.to(DType::kF64), y = b.to(DType::kF64);
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    m = std::max(m, std::abs(x.data<double>()[i] - y.data<double>()[i]));
  return m;
}

// Two compiled backends on the same inputs (the CUDA kernels against the emulation): how many
// units in the last place of the stored dtype apart. |a - b| is measured in ulps of `dt` at
// max(|a|, |b|, floor): the floor (1% of the RMS) keeps values that cancelled to near zero from
// counting as many ulps. (compare_tensors measures against the reference alone, without a floor;
// two compiled backends need the symmetric, floored form.)
struct UlpStats {
  double max = 0;
  double over_one = 0;  // fraction of elements more than 1 ulp apart
  int64_t mismatched_non_finite = 0;
};

inline UlpStats compare_ulps(const Tensor& got, const Tensor& want) {
  const Tensor a = got.to(DType::kF64), b = want.to(DType::kF64);
  double sum_sq = 0;
  for (int64_t i = 0; i < b.numel(); ++i)
    if (std::isfinite(b.data<double>()[i])) sum_sq += b.data<double>()[i] * b.data<double>()[i];
  const double floor =
      std::max(1e-30, 1e-2 * std::sqrt(sum_sq / double(std::max<int64_t>(1, b.numel()))));
  UlpStats s;
  int64_t over = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double x = a.data<double>()[i], y = b.data<double>()[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      s.mismatched_non_finite += same ? 0 : 1;
      continue;
    }
    const double d =
        std::abs(x - y) / ulp_at(std::max({std::abs(x), std::abs(y), floor}), want.dtype());
    s.max = std::max(s.max, d);
    over += d > 1 ? 1 : 0;
  }
  s.over_one = double(over) / double(std::max<int64_t>(1, b.numel()));
  return s;
}

}  // namespace tp::testing
