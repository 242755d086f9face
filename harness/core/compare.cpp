#include "harness/core/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

// After quantile(v, 0.5): v's q-quantile (q >= 0.5) from the part above the median's position.
double quantile_above_median(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t mid =
      std::min(v.size() - 1, std::size_t(std::lround(0.5 * double(v.size() - 1))));
  const std::size_t k = std::min(v.size() - 1, std::size_t(std::lround(q * double(v.size() - 1))));
  if (k <= mid) return v[mid];
  std::nth_element(v.begin() + std::ptrdiff_t(mid) + 1, v.begin() + std::ptrdiff_t(k), v.end());
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
  if (!std::isfinite(m)) return std::ldexp(dtype_epsilon(dt), std::ilogb(m));
  // m's binade starts at 2^e, e its unbiased exponent (m is normal: at least the dtype's smallest
  // normal); the spacing there is eps * 2^e, itself a power of two, built from its bits (frexp and
  // ldexp cost more than the rest of a comparison).
  uint64_t bits;
  std::memcpy(&bits, &m, sizeof bits);
  const int64_t e = int64_t((bits >> 52) & 0x7ff) - 1023;
  int eps_exp = 0;
  std::frexp(dtype_epsilon(dt), &eps_exp);  // eps = 2^(eps_exp - 1)
  const int64_t exponent = e + eps_exp - 1;
  if (exponent < -1022) return std::ldexp(1.0, int(exponent));
  const uint64_t out = uint64_t(exponent + 1023) << 52;
  double spacing;
  std::memcpy(&spacing, &out, sizeof spacing);
  return spacing;
}

namespace {

// The element loop runs in blocks of a fixed size, in parallel; their partial results are joined
// in block order, so the metrics do not depend on the thread count (and a tensor of one block,
// as every tiny model's, sums in element order, as a plain loop would).
constexpr int64_t kBlock = int64_t(1) << 20;

using Ranked = std::pair<double, int64_t>;  // |got - want|, element
bool worse(const Ranked& x, const Ranked& y) {
  return x.first > y.first || (x.first == y.first && x.second < y.second);
}
constexpr std::size_t kWorst = 5;

struct Partial {
  double max_abs = 0, max_rel = 0, diff_sq = 0, want_sq = 0, got_sq = 0, dot = 0;
  double s_sum = 0, s_sq = 0, aligned_sum = 0;
  int64_t count = 0, toward = 0, away = 0, non_finite_got = 0, non_finite_want = 0,
          non_finite_new = 0;
  std::vector<Ranked> worst;  // up to kWorst, worst first
};

}  // namespace

Expected<Metrics> compare_tensors(const Tensor& got, const Tensor& want, DType compared,
                                  double rel_floor) {
  if (got.shape() != want.shape())
    return Error("shape " + shape_string(got.shape()) + " does not match the reference's " +
                 shape_string(want.shape()));
  const Tensor g = got.to(DType::kF64), w = want.to(DType::kF64);
  const double* a = g.data<double>();
  const double* b = w.data<double>();
  const int64_t n = g.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  Metrics m;
  std::vector<double> block_max(static_cast<std::size_t>(blocks), 0.0),
      block_sq(static_cast<std::size_t>(blocks), 0.0);
  std::vector<int64_t> block_finite(static_cast<std::size_t>(blocks), 0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t k = 0; k < blocks; ++k)
    for (int64_t i = k * kBlock; i < std::min(n, (k + 1) * kBlock); ++i)
      if (std::isfinite(b[i])) {
        block_max[std::size_t(k)] = std::max(block_max[std::size_t(k)], std::abs(b[i]));
        block_sq[std::size_t(k)] += b[i] * b[i];
        ++block_finite[std::size_t(k)];
      }
  double want_sq_all = 0;
  int64_t finite_want = 0;
  for (int64_t k = 0; k < blocks; ++k) {
    m.want_max_abs = std::max(m.want_max_abs, block_max[std::size_t(k)]);
    want_sq_all += block_sq[std::size_t(k)];
    finite_want += block_finite[std::size_t(k)];
  }
  // Bias statistics count each element in ULPs at its own magnitude, but no finer than at the
  // reference's rms: near-zero elements (whose ULP is tiny) would otherwise swamp the mean with
  // compute noise.
  const double bias_ulp_from = finite_want > 0 ? std::sqrt(want_sq_all / double(finite_want)) : 0;
  const double ulp_at_rms = ulp_at(bias_ulp_from, compared);
  const double floor = std::max(rel_floor * m.want_max_abs, std::numeric_limits<double>::min());
  // Each block writes its elements' ULP distances from its own start; compacted after.
  std::vector<double> ulps(static_cast<std::size_t>(n));
  std::vector<Partial> parts(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t k = 0; k < blocks; ++k) {
    Partial& p = parts[std::size_t(k)];
    double* out = ulps.data() + k * kBlock;
    for (int64_t i = k * kBlock; i < std::min(n, (k + 1) * kBlock); ++i) {
      const bool fg = std::isfinite(a[i]), fw = std::isfinite(b[i]);
      p.non_finite_got += fg ? 0 : 1;
      p.non_finite_want += fw ? 0 : 1;
      if (!fg || !fw) {
        const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
        p.non_finite_new += (!fg && !same) ? 1 : 0;
        continue;
      }
      const double d = std::abs(a[i] - b[i]);
      p.max_abs = std::max(p.max_abs, d);
      p.max_rel = std::max(p.max_rel, d / std::max(std::abs(b[i]), floor));
      p.diff_sq += d * d;
      p.want_sq += b[i] * b[i];
      p.got_sq += a[i] * a[i];
      p.dot += a[i] * b[i];
      const double ulp = ulp_at(b[i], compared);
      out[p.count++] = d / ulp;
      const double sign = b[i] > 0 ? 1 : b[i] < 0 ? -1 : 0;
      const double signed_ulps =
          (a[i] - b[i]) * sign / (std::abs(b[i]) >= bias_ulp_from ? ulp : ulp_at_rms);
      p.aligned_sum += (a[i] - b[i]) * sign;
      p.s_sum += signed_ulps;
      p.s_sq += signed_ulps * signed_ulps;
      p.toward += signed_ulps < 0 ? 1 : 0;
      p.away += signed_ulps > 0 ? 1 : 0;
      // The block's worst few, kept sorted (a min-size insertion: kWorst is small).
      const Ranked r{d, i};
      if (p.worst.size() < kWorst || worse(r, p.worst.back())) {
        p.worst.insert(std::upper_bound(p.worst.begin(), p.worst.end(), r, worse), r);
        if (p.worst.size() > kWorst) p.worst.pop_back();
      }
    }
  }
  double diff_sq = 0, want_sq = 0, got_sq = 0, dot = 0, s_sum = 0, s_sq = 0, aligned_sum = 0;
  int64_t toward = 0, away = 0;
  std::vector<Ranked> worst;
  for (int64_t k = 0; k < blocks; ++k) {
    const Partial& p = parts[std::size_t(k)];
    if (k > 0)  // compact this block's ULP distances behind the previous ones
      std::copy(ulps.begin() + k * kBlock, ulps.begin() + k * kBlock + p.count,
                ulps.begin() + m.count);
    m.count += p.count;
    m.non_finite_got += p.non_finite_got;
    m.non_finite_want += p.non_finite_want;
    m.non_finite_new += p.non_finite_new;
    m.max_abs = std::max(m.max_abs, p.max_abs);
    m.max_rel = std::max(m.max_rel, p.max_rel);
    diff_sq += p.diff_sq;
    want_sq += p.want_sq;
    got_sq += p.got_sq;
    dot += p.dot;
    s_sum += p.s_sum;
    s_sq += p.s_sq;
    aligned_sum += p.aligned_sum;
    toward += p.toward;
    away += p.away;
    worst.insert(worst.end(), p.worst.begin(), p.worst.end());
  }
  ulps.resize(std::size_t(m.count));
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
  // The median, then the 99th percentile among the elements the first partition left above it.
  m.ulp_median = quantile(ulps, 0.5);
  m.ulp_p99 = quantile_above_median(ulps, 0.99);
  m.headroom = m.want_max_abs > 0 ? dtype_max_finite(compared) / m.want_max_abs : INFINITY;
  std::sort(worst.begin(), worst.end(), worse);
  for (std::size_t j = 0; j < std::min(kWorst, worst.size()); ++j) {
    const int64_t i = worst[j].second;
    m.worst.push_back(WorstElement{unflatten_index(i, got.shape()), a[i], b[i], worst[j].first});
  }
  return m;
}

}  // namespace tp
