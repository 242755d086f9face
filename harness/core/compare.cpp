#include "harness/core/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

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

constexpr int64_t kBlock = int64_t(1) << 20;  // elements per parallel block (see below)

// The k-th smallest of v (0-based): the value std::nth_element would put at k, found in
// parallel. A fixed-stride sample brackets it; one parallel pass counts the elements below and
// inside the bracket; only those inside are gathered and selected from. When the bracket misses
// (data laid out against the stride), everything is selected from, as before.
double kth_smallest(std::vector<double>& v, std::size_t k) {
  const std::size_t n = v.size();
  if (n < std::size_t(4 * kBlock)) {
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
    return v[k];
  }
  constexpr std::size_t kSample = std::size_t(1) << 14, kMargin = 256;
  std::vector<double> sample(kSample);
  for (std::size_t i = 0; i < kSample; ++i) sample[i] = v[i * (n / kSample)];
  std::sort(sample.begin(), sample.end());
  const std::size_t at = std::size_t(double(k) / double(n) * double(kSample));
  const double lo = at < kMargin ? -INFINITY : sample[at - kMargin];
  const double hi = at + kMargin >= kSample ? INFINITY : sample[at + kMargin];
  const int64_t blocks = (int64_t(n) + kBlock - 1) / kBlock;
  std::vector<int64_t> below(static_cast<std::size_t>(blocks)),
      inside(static_cast<std::size_t>(blocks));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const double* x = v.data() + b * kBlock;
    const int64_t count = std::min(int64_t(n), (b + 1) * kBlock) - b * kBlock;
    int64_t under = 0, within = 0;
    for (int64_t i = 0; i < count; ++i) {
      under += x[i] < lo;
      within += (x[i] >= lo) & (x[i] <= hi);
    }
    below[std::size_t(b)] = under;
    inside[std::size_t(b)] = within;
  }
  std::vector<int64_t> offset(static_cast<std::size_t>(blocks) + 1, 0);
  int64_t under = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    under += below[std::size_t(b)];
    offset[std::size_t(b) + 1] = offset[std::size_t(b)] + inside[std::size_t(b)];
  }
  const int64_t in = offset.back();
  if (int64_t(k) < under || int64_t(k) >= under + in) {
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
    return v[k];
  }
  if (lo == hi) return lo;
  std::vector<double> bracket(static_cast<std::size_t>(in));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    int64_t j = offset[std::size_t(b)];
    for (int64_t i = b * kBlock; i < std::min(int64_t(n), (b + 1) * kBlock); ++i)
      if (v[std::size_t(i)] >= lo && v[std::size_t(i)] <= hi)
        bracket[std::size_t(j++)] = v[std::size_t(i)];
  }
  const std::size_t r = std::size_t(int64_t(k) - under);
  std::nth_element(bracket.begin(), bracket.begin() + std::ptrdiff_t(r), bracket.end());
  return bracket[r];
}

// A nonnegative double's bits, ordered as the values are (+inf last).
uint64_t order_key(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

constexpr int kDigit = 12;  // bits per radix digit
constexpr uint32_t kBuckets = 1u << kDigit;

// The bucket of histogram `h` that holds rank k, and k's rank among that bucket's elements.
std::pair<uint32_t, std::size_t> bucket_of(const std::vector<uint32_t>& h, std::size_t k) {
  std::size_t below = 0;
  uint32_t b = 0;
  while (below + h[b] <= k) below += h[b++];
  return {b, k - below};
}

// Ranks k0 <= k1 of v, nonnegative and not NaN (ULP distances): the buckets of the keys' top
// 12 bits that hold them, then of the next 12 bits inside those, then a selection among the
// elements that share all 24 (few, but for runs of equal values). Three streaming passes in
// place of two introselects over everything (9% of a ci run's samples); the same elements.
std::pair<double, double> radix_ranks(const std::vector<double>& v, std::size_t k0,
                                      std::size_t k1) {
  // Four interleaved counts of the top digit (a nonnegative key's is at most 2047): runs of
  // one exponent would otherwise wait on one counter's increments.
  constexpr uint32_t kTop = kBuckets / 2;
  std::vector<uint32_t> quarters(4 * kTop), top(kBuckets), mid0(kBuckets), mid1(kBuckets);
  const std::size_t n = v.size(), whole = n - n % 4;
  for (std::size_t i = 0; i < whole; i += 4)
    for (std::size_t j = 0; j < 4; ++j) ++quarters[j * kTop + (order_key(v[i + j]) >> 52)];
  for (std::size_t i = whole; i < n; ++i) ++quarters[order_key(v[i]) >> 52];
  for (uint32_t b = 0; b < kTop; ++b)
    top[b] = quarters[b] + quarters[kTop + b] + quarters[2 * kTop + b] + quarters[3 * kTop + b];
  const auto [t0, r0] = bucket_of(top, k0);
  const auto [t1, r1] = bucket_of(top, k1);
  for (double x : v) {
    const uint64_t key = order_key(x);
    const uint64_t t = key >> (64 - kDigit), m = (key >> (64 - 2 * kDigit)) & (kBuckets - 1);
    mid0[m] += t == t0;
    mid1[m] += t == t1;
  }
  const auto [m0, s0] = bucket_of(mid0, r0);
  const auto [m1, s1] = bucket_of(mid1, r1);
  const uint64_t p0 = uint64_t(t0) << kDigit | m0, p1 = uint64_t(t1) << kDigit | m1;
  std::vector<double> g0, g1;
  for (double x : v) {
    const uint64_t p = order_key(x) >> (64 - 2 * kDigit);
    if (p == p0)
      g0.push_back(x);
    else if (p == p1)
      g1.push_back(x);
  }
  std::nth_element(g0.begin(), g0.begin() + std::ptrdiff_t(s0), g0.end());
  if (p0 != p1) {
    std::nth_element(g1.begin(), g1.begin() + std::ptrdiff_t(s1), g1.end());
    return {g0[s0], g1[s1]};
  }
  // One bucket holds both: past s0, nth_element left only elements at least g0[s0].
  std::nth_element(g0.begin() + std::ptrdiff_t(s0) + 1, g0.begin() + std::ptrdiff_t(s1), g0.end());
  return {g0[s0], g0[s1]};
}

// Below this many elements the histograms cost more than selecting.
constexpr std::size_t kRadixFrom = 4096;

// v's q-quantile is the element at rank round(q (n - 1)); the median's and the 99th
// percentile's, in that order. Below the parallel selection's size the second selection runs
// past the median's rank only: nth_element left every element there at least the median.
std::pair<double, double> median_and_p99(std::vector<double>& v) {
  if (v.empty()) return {0, 0};
  const std::size_t n = v.size();
  auto rank = [n](double q) {
    return std::min(n - 1, std::size_t(std::lround(q * double(n - 1))));
  };
  const std::size_t k50 = rank(0.5), k99 = rank(0.99);
  if (n >= std::size_t(4 * kBlock) || k99 == k50)
    return {kth_smallest(v, k50), kth_smallest(v, k99)};
  if (n >= kRadixFrom) return radix_ranks(v, k50, k99);
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k50), v.end());
  const double median = v[k50];
  std::nth_element(v.begin() + std::ptrdiff_t(k50) + 1, v.begin() + std::ptrdiff_t(k99), v.end());
  return {median, v[k99]};
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

namespace {

// ulp_at for one dtype, its constants taken once.
class UlpSpacing {
 public:
  explicit UlpSpacing(DType dt) : dt_(dt), smallest_(smallest_normal(dt)) {
    std::frexp(dtype_epsilon(dt), &eps_exp_);  // eps = 2^(eps_exp - 1)
  }
  double operator()(double x) const {
    const double m = std::max(std::abs(x), smallest_);
    if (!std::isfinite(m)) return std::ldexp(dtype_epsilon(dt_), std::ilogb(m));
    const int64_t exponent = exponent_of(m);
    if (exponent < -1022) return std::ldexp(1.0, int(exponent));
    return power_of_two(exponent);
  }
  // Whether reciprocal() is exact for every finite x: 2^-exponent is a double whenever the
  // spacing is a normal number (all but f64's spacing near zero).
  bool has_reciprocal() const { return dt_ != DType::kF64; }
  // 1 / operator()(x) for finite x: x / spacing and x * reciprocal round the same real number
  // (the spacing is a power of two), so they are the same double; and no division is spent.
  double reciprocal(double x) const {
    return power_of_two(-exponent_of(std::max(std::abs(x), smallest_)));
  }

 private:
  // m's binade starts at 2^e, e its unbiased exponent (m is normal: at least the dtype's
  // smallest normal); the spacing there is eps * 2^e, itself a power of two, built from its
  // bits (frexp and ldexp cost more than the rest of a comparison).
  int64_t exponent_of(double m) const {
    uint64_t bits;
    std::memcpy(&bits, &m, sizeof bits);
    const int64_t e = int64_t((bits >> 52) & 0x7ff) - 1023;
    return e + eps_exp_ - 1;
  }
  static double power_of_two(int64_t exponent) {  // normal range only
    const uint64_t out = uint64_t(exponent + 1023) << 52;
    double value;
    std::memcpy(&value, &out, sizeof value);
    return value;
  }

  DType dt_;
  double smallest_;
  int eps_exp_ = 0;
};

}  // namespace

double ulp_at(double x, DType dt) { return UlpSpacing(dt)(x); }

namespace {

// The element loop runs in blocks of kBlock elements, in parallel; their partial results are
// joined in block order, so the metrics do not depend on the thread count (and a tensor of one
// block, as every tiny model's, sums in element order, as a plain loop would).

using Ranked = std::pair<double, int64_t>;  // |got - want|, element
bool worse(const Ranked& x, const Ranked& y) {
  return x.first > y.first || (x.first == y.first && x.second < y.second);
}
constexpr std::size_t kWorst = 5;

struct Partial {
  double max_abs = 0, max_rel = 0, diff_sq = 0, want_sq = 0, got_sq = 0, dot = 0;
  double s_sum = 0, s_sq = 0, aligned_sum = 0, ulp_max = 0;
  int64_t count = 0, toward = 0, away = 0, non_finite_got = 0, non_finite_want = 0,
          non_finite_new = 0;
  std::vector<Ranked> worst;  // up to kWorst, worst first
};

// One block's elements compared: got[j] against want[j] (element first + j), their ULP
// distances written to out[0, count). The sums are locals, kept in registers (the ULP
// distances' stores could alias a Partial's doubles); in element order, as a plain loop.
struct BlockScan {
  UlpSpacing ulp_of;
  double floor, bias_ulp_from, ulp_at_rms;

  Partial operator()(const double* got, const double* want, int64_t first, int64_t n,
                     double* out) const {
    const bool exact_reciprocal = ulp_of.has_reciprocal();
    const double per_ulp_at_rms = exact_reciprocal ? ulp_of.reciprocal(bias_ulp_from) : 0;
    double max_abs = 0, max_rel = 0, diff_sq = 0, want_sq = 0, got_sq = 0, dot = 0;
    double s_sum = 0, s_sq = 0, aligned_sum = 0, ulp_max = 0;
    int64_t count = 0, toward = 0, away = 0, nf_got = 0, nf_want = 0, nf_new = 0;
    std::vector<Ranked> worst;
    double admit = -1;  // below this |got - want| an element cannot enter the worst few
    for (int64_t j = 0; j < n; ++j) {
      const double a = got[j], b = want[j];
      const bool fg = std::isfinite(a), fw = std::isfinite(b);
      if (!fg || !fw) {
        nf_got += fg ? 0 : 1;
        nf_want += fw ? 0 : 1;
        const bool same = (std::isnan(a) && std::isnan(b)) || a == b;
        nf_new += (!fg && !same) ? 1 : 0;
        continue;
      }
      const double d = std::abs(a - b);
      max_abs = std::max(max_abs, d);
      // d / q past max_rel needs d >= max_rel q, so the division is skipped below that (with a
      // margin past the product's rounding, so the skipped quotients are at most max_rel).
      const double q = std::max(std::abs(b), floor);
      if (d >= max_rel * q * (1 - 0x1p-50)) max_rel = std::max(max_rel, d / q);
      diff_sq += d * d;
      want_sq += b * b;
      got_sq += a * a;
      dot += a * b;
      const double sign = b > 0 ? 1 : b < 0 ? -1 : 0;
      const bool own = std::abs(b) >= bias_ulp_from;
      double signed_ulps;
      if (exact_reciprocal) {
        const double per_ulp = ulp_of.reciprocal(b);
        out[count] = d * per_ulp;
        signed_ulps = (a - b) * sign * (own ? per_ulp : per_ulp_at_rms);
      } else {
        const double ulp = ulp_of(b);
        out[count] = d / ulp;
        signed_ulps = (a - b) * sign / (own ? ulp : ulp_at_rms);
      }
      ulp_max = std::max(ulp_max, out[count++]);
      aligned_sum += (a - b) * sign;
      s_sum += signed_ulps;
      s_sq += signed_ulps * signed_ulps;
      toward += signed_ulps < 0 ? 1 : 0;
      away += signed_ulps > 0 ? 1 : 0;
      // The block's worst few, kept sorted (a min-size insertion: kWorst is small).
      if (d < admit) continue;
      const Ranked r{d, first + j};
      if (worst.size() < kWorst || worse(r, worst.back())) {
        worst.insert(std::upper_bound(worst.begin(), worst.end(), r, worse), r);
        if (worst.size() > kWorst) worst.pop_back();
        if (worst.size() == kWorst) admit = worst.back().first;
      }
    }
    return Partial{max_abs, max_rel, diff_sq,     want_sq, got_sq,          dot,
                   s_sum,   s_sq,    aligned_sum, ulp_max, count,           toward,
                   away,    nf_got,  nf_want,     nf_new,  std::move(worst)};
  }
};

}  // namespace

Expected<Metrics> compare_tensors(const Tensor& got, const Tensor& want, DType compared,
                                  double rel_floor) {
  if (got.shape() != want.shape())
    return Error("shape " + shape_string(got.shape()) + " does not match the reference's " +
                 shape_string(want.shape()));
  // Each block widens its own elements to double (no whole-tensor copies).
  const int64_t n = got.numel();
  auto widen = [n](const Tensor& t, int64_t k, std::vector<double>& out) {
    const int64_t begin = k * kBlock, count = std::min(n, begin + kBlock) - begin;
    out.resize(std::size_t(count));
    convert_elements(
        static_cast<const std::byte*>(t.raw()) + begin * int64_t(dtype_size(t.dtype())), t.dtype(),
        out.data(), DType::kF64, std::size_t(count));
    return out.data();
  };
  const UlpSpacing ulp_of(compared);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  Metrics m;
  std::vector<double> block_max(static_cast<std::size_t>(blocks), 0.0),
      block_sq(static_cast<std::size_t>(blocks), 0.0);
  std::vector<int64_t> block_finite(static_cast<std::size_t>(blocks), 0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t k = 0; k < blocks; ++k) {
    std::vector<double> wb;
    const double* b = widen(want, k, wb);  // b[j]: element k * kBlock + j
    double largest = 0, sq = 0;            // locals, stored once: block_max and block_sq alias b
    int64_t finite = 0;
    for (int64_t j = 0; j < int64_t(wb.size()); ++j)
      if (std::isfinite(b[j])) {
        largest = std::max(largest, std::abs(b[j]));
        sq += b[j] * b[j];
        ++finite;
      }
    block_max[std::size_t(k)] = largest;
    block_sq[std::size_t(k)] = sq;
    block_finite[std::size_t(k)] = finite;
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
  const double ulp_at_rms = ulp_of(bias_ulp_from);
  const double floor = std::max(rel_floor * m.want_max_abs, std::numeric_limits<double>::min());
  // Each block writes its elements' ULP distances from its own start; compacted after.
  std::vector<double> ulps(static_cast<std::size_t>(n));
  std::vector<Partial> parts(static_cast<std::size_t>(blocks));
  const BlockScan scan{ulp_of, floor, bias_ulp_from, ulp_at_rms};
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t k = 0; k < blocks; ++k) {
    std::vector<double> gb, wb;
    const double* ga = widen(got, k, gb);  // ga[j]: element k * kBlock + j
    const double* wa = widen(want, k, wb);
    parts[std::size_t(k)] = scan(ga, wa, k * kBlock, int64_t(gb.size()), ulps.data() + k * kBlock);
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
    m.ulp_max = std::max(m.ulp_max, p.ulp_max);
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
  std::tie(m.ulp_median, m.ulp_p99) = median_and_p99(ulps);
  m.headroom = m.want_max_abs > 0 ? dtype_max_finite(compared) / m.want_max_abs : INFINITY;
  std::sort(worst.begin(), worst.end(), worse);
  for (std::size_t j = 0; j < std::min(kWorst, worst.size()); ++j) {
    const int64_t i = worst[j].second;
    double a = 0, b = 0;
    convert_elements(
        static_cast<const std::byte*>(got.raw()) + i * int64_t(dtype_size(got.dtype())),
        got.dtype(), &a, DType::kF64, 1);
    convert_elements(
        static_cast<const std::byte*>(want.raw()) + i * int64_t(dtype_size(want.dtype())),
        want.dtype(), &b, DType::kF64, 1);
    m.worst.push_back(WorstElement{unflatten_index(i, got.shape()), a, b, worst[j].first});
  }
  return m;
}

}  // namespace tp
