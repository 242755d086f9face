#include "harness/core/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tp {
namespace {

double smallest_normal(DType dt) {
  switch (dt) {
    case DType::kF64:
      return std::numeric_limits<double>::min();
    case DType::kF16:
      return 0x1p-14;
    case DType::kF8E4M3:
      return 0x1p-6;
    case DType::kF8E5M2:
      return 0x1p-14;
    default:
      return std::numeric_limits<float>::min();  // f32, bf16
  }
}

double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, std::size_t(std::lround(q * double(v.size() - 1))));
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return v[k];
}

}  // namespace

Shape unflatten_index(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

double ulp_at(double x, DType dt) {
  const double m = std::max(std::abs(x), smallest_normal(dt));
  int e = 0;
  std::frexp(m, &e);  // m = f * 2^e, f in [0.5, 1): its binade starts at 2^(e-1)
  return std::ldexp(dtype_epsilon(dt), e - 1);
}

Expected<Metrics> compare_tensors(const Tensor& got, const Tensor& want, DType compared,
                                  double rel_floor) {
  if (got.shape() != want.shape())
    return Error("shape " + shape_string(got.shape()) + " does not match the reference's " +
                 shape_string(want.shape()));
  const Tensor g = got.to(DType::kF64), w = want.to(DType::kF64);
  const double* a = g.data<double>();
  const double* b = w.data<double>();
  const int64_t n = g.numel();
  Metrics m;
  double want_sq_all = 0;
  int64_t finite_want = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(b[i])) {
      m.want_max_abs = std::max(m.want_max_abs, std::abs(b[i]));
      want_sq_all += b[i] * b[i];
      ++finite_want;
    }
  // Bias statistics count each element in ULPs at its own magnitude, but no finer than at the
  // reference's rms: near-zero elements (whose ULP is tiny) would otherwise swamp the mean with
  // compute noise.
  const double bias_ulp_from = finite_want > 0 ? std::sqrt(want_sq_all / double(finite_want)) : 0;
  const double ulp_at_rms = ulp_at(bias_ulp_from, compared);
  double aligned_sum = 0;
  const double floor = std::max(rel_floor * m.want_max_abs, std::numeric_limits<double>::min());
  double diff_sq = 0, want_sq = 0, got_sq = 0, dot = 0, s_sum = 0, s_sq = 0;
  int64_t toward = 0, away = 0;
  std::vector<double> ulps;
  ulps.reserve(std::size_t(n));
  std::vector<std::pair<double, int64_t>> errors;
  errors.reserve(std::size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const bool fg = std::isfinite(a[i]), fw = std::isfinite(b[i]);
    m.non_finite_got += fg ? 0 : 1;
    m.non_finite_want += fw ? 0 : 1;
    if (!fg || !fw) {
      const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
      m.non_finite_new += (!fg && !same) ? 1 : 0;
      continue;
    }
    const double d = std::abs(a[i] - b[i]);
    ++m.count;
    m.max_abs = std::max(m.max_abs, d);
    m.max_rel = std::max(m.max_rel, d / std::max(std::abs(b[i]), floor));
    diff_sq += d * d;
    want_sq += b[i] * b[i];
    got_sq += a[i] * a[i];
    dot += a[i] * b[i];
    const double ulp = ulp_at(b[i], compared);
    ulps.push_back(d / ulp);
    const double sign = b[i] > 0 ? 1 : b[i] < 0 ? -1 : 0;
    const double signed_ulps =
        (a[i] - b[i]) * sign / (std::abs(b[i]) >= bias_ulp_from ? ulp : ulp_at_rms);
    aligned_sum += (a[i] - b[i]) * sign;
    s_sum += signed_ulps;
    s_sq += signed_ulps * signed_ulps;
    toward += signed_ulps < 0 ? 1 : 0;
    away += signed_ulps > 0 ? 1 : 0;
    errors.emplace_back(d, i);
  }
  m.rel_l2 = want_sq > 0 ? std::sqrt(diff_sq / want_sq) : (diff_sq > 0 ? INFINITY : 0);
  m.cosine =
      (want_sq > 0 && got_sq > 0) ? dot / std::sqrt(want_sq * got_sq) : (want_sq == got_sq ? 1 : 0);
  if (m.count > 0 && diff_sq > 0)
    m.bias_ratio = aligned_sum / double(m.count) / std::sqrt(diff_sq / double(m.count));
  if (m.count > 0) {
    const double n_elements = double(m.count), mean = s_sum / n_elements;
    m.bias_ulp = mean;
    m.ulp_rms = std::sqrt(s_sq / n_elements);
    const double var = std::max(0.0, s_sq / n_elements - mean * mean);
    m.bias_se = std::sqrt(var / n_elements);
    m.toward_zero = double(toward) / n_elements;
    m.away_from_zero = double(away) / n_elements;
  }
  if (!ulps.empty()) m.ulp_max = *std::max_element(ulps.begin(), ulps.end());
  m.ulp_median = quantile(ulps, 0.5);
  m.ulp_p99 = quantile(ulps, 0.99);
  m.headroom = m.want_max_abs > 0 ? dtype_max_finite(compared) / m.want_max_abs : INFINITY;
  const std::size_t k = std::min<std::size_t>(5, errors.size());
  std::partial_sort(errors.begin(), errors.begin() + std::ptrdiff_t(k), errors.end(),
                    [](const auto& x, const auto& y) {
                      return x.first > y.first || (x.first == y.first && x.second < y.second);
                    });
  for (std::size_t j = 0; j < k; ++j) {
    const int64_t i = errors[j].second;
    m.worst.push_back(WorstElement{unflatten_index(i, got.shape()), a[i], b[i], errors[j].first});
  }
  return m;
}

}  // namespace tp
