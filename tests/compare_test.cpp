// Checkpoint comparison metrics (harness/compare.*): each metric on tensors whose answer is
// known by construction.
#include "harness/core/compare.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/core/contract.h"
#include "harness/core/rng.h"

namespace tp {
namespace {

Tensor ramp(Shape shape) {
  Tensor t(DType::kF32, shape);
  Rng rng(3, "ramp");
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(rng.uniform(0.5, 1.0)) * (i % 2 ? 1.0f : -1.0f);
  return t;
}

TEST(Compare, IdenticalTensorsHaveNoError) {
  const Tensor a = ramp({1, 2, 4, 4});
  auto m = compare_tensors(a, a, DType::kF16);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->count, 32);
  EXPECT_EQ(m->max_abs, 0);
  EXPECT_EQ(m->rel_l2, 0);
  EXPECT_DOUBLE_EQ(m->cosine, 1);
  EXPECT_EQ(m->ulp_max, 0);
  EXPECT_EQ(m->non_finite_new, 0);
}

// Rounding bias: the same values stored in f16 by rounding to nearest and by truncating (the
// magnitude's low bits dropped): the mean signed error is near 0 ULP for the first and near
// -0.5 ULP (toward zero) for the second, many standard errors out.
TEST(Compare, TruncatingStoreShowsAsBiasTowardZero) {
  Tensor want(DType::kF32, {1, 4, 32, 32});
  Rng rng(5, "bias");
  for (int64_t i = 0; i < want.numel(); ++i)
    want.data<float>()[i] = float(rng.uniform(1.0, 2.0)) * (i % 3 ? 1.0f : -1.0f);
  const Tensor nearest = want.to(DType::kF16).to(DType::kF32);
  Tensor truncated = nearest;
  for (int64_t i = 0; i < want.numel(); ++i) {
    float& t = truncated.data<float>()[i];
    const float w = want.data<float>()[i];
    if (std::abs(t) > std::abs(w)) t -= std::copysign(float(0x1p-10), w);  // f16 ulp in [1, 2)
  }
  auto rne = compare_tensors(nearest, want, DType::kF16);
  auto rtz = compare_tensors(truncated, want, DType::kF16);
  ASSERT_TRUE(rne.ok() && rtz.ok());
  EXPECT_LT(std::abs(rne->bias_ulp), 4 * rne->bias_se + 0.02);
  EXPECT_NEAR(rtz->bias_ulp, -0.5, 0.03);
  EXPECT_GT(-rtz->bias_ulp, 50 * rtz->bias_se);
  EXPECT_GT(rtz->toward_zero, 0.99);
  EXPECT_NEAR(rne->toward_zero, 0.5, 0.05);
  EXPECT_NEAR(rne->away_from_zero, 0.5, 0.05);
  EXPECT_LT(rtz->bias_ratio, -0.8);  // mean / rms of a uniform [-1, 0) ULP error: -0.87
  EXPECT_NEAR(rtz->ulp_rms, std::sqrt(1.0 / 3.0), 0.03);
}

TEST(Compare, PlantedErrorIsMeasuredInUlpsAndLocated) {
  const Tensor want = ramp({1, 2, 4, 4});
  Tensor got = want.to(DType::kF16).to(DType::kF32);  // within half an f16 ulp everywhere
  // Element [0, 1, 2, 3] moved by exactly 3 f16 ulps of its value, 1.5 <= |x| < 2 after scaling.
  const int64_t flat = ((0 * 2 + 1) * 4 + 2) * 4 + 3;
  const float base = 1.75f;
  Tensor w2 = want;
  w2.data<float>()[flat] = base;
  got.data<float>()[flat] = base + 3 * float(0x1p-10);  // f16 ulp in [1, 2) is 2^-10
  auto m = compare_tensors(got, w2, DType::kF16);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->ulp_max, 3.0);
  EXPECT_LE(m->ulp_median, 0.5);
  ASSERT_FALSE(m->worst.empty());
  EXPECT_EQ(m->worst[0].index, (Shape{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(m->worst[0].abs_error, 3 * 0x1p-10);
  EXPECT_DOUBLE_EQ(m->max_abs, 3 * 0x1p-10);
  EXPECT_EQ(m->worst.size(), 5u);
  EXPECT_GE(m->worst[0].abs_error, m->worst[4].abs_error);
  EXPECT_GT(m->rel_l2, 0);
  EXPECT_LT(m->cosine, 1);
}

TEST(Compare, NonFiniteValuesAreCountedPerSide) {
  Tensor want = ramp({1, 1, 2, 4}), got = want;
  got.data<float>()[1] = NAN;        // new: the reference is finite there
  want.data<float>()[2] = INFINITY;  // the same inf on both sides is not new
  got.data<float>()[2] = INFINITY;
  want.data<float>()[5] = NAN;  // NaN in both: not new
  got.data<float>()[5] = NAN;
  auto m = compare_tensors(got, want, DType::kF16);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->non_finite_got, 3);
  EXPECT_EQ(m->non_finite_want, 2);
  EXPECT_EQ(m->non_finite_new, 1);
  EXPECT_EQ(m->count, 5);
  EXPECT_EQ(m->max_abs, 0);
}

TEST(Compare, HeadroomIsTheDtypeMaxOverTheReferenceMax) {
  Tensor want(DType::kF32, {1, 1, 1, 2});
  want.data<float>()[0] = 32752.0f;
  want.data<float>()[1] = -1.0f;
  auto m = compare_tensors(want, want, DType::kF16);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->headroom, 2.0);
  auto zero = compare_tensors(Tensor(DType::kF32, {4}), Tensor(DType::kF32, {4}), DType::kF16);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(std::isinf(zero->headroom));
  EXPECT_EQ(zero->rel_l2, 0);
}

TEST(Compare, NearZeroReferenceValuesUseTheFloor) {
  Tensor want(DType::kF32, {3}), got(DType::kF32, {3});
  want.data<float>()[0] = 100.0f;
  got.data<float>()[0] = 100.0f;
  want.data<float>()[1] = 1e-9f;  // tiny: its relative error is measured against 1e-3 * 100
  got.data<float>()[1] = 1e-2f;
  auto m = compare_tensors(got, want, DType::kF32);
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->max_rel, (1e-2 - 1e-9) / 0.1, 1e-6);
}

// Tensors of several blocks (more than 2^20 elements) are compared in parallel: the metrics are
// the same bits whatever the thread count, match a plain loop's to rounding, and the worst
// elements are found across blocks.
TEST(Compare, LargeTensorsGiveTheSameMetricsOnAnyThreadCount) {
  const int64_t n = 3 * (int64_t(1) << 20) + 12345;
  Tensor want(DType::kF32, {n}), got(DType::kF32, {n});
  Rng rng(5, "large-compare");
  for (int64_t i = 0; i < n; ++i) {
    want.data<float>()[i] = float(rng.uniform(-2, 2));
    got.data<float>()[i] = want.data<float>()[i] + float(rng.uniform(-1e-3, 1e-3));
  }
  got.data<float>()[n - 7] = want.data<float>()[n - 7] + 0.5f;  // the worst, in the last block
  got.data<float>()[100] = want.data<float>()[100] - 0.25f;     // second, in the first
  got.data<float>()[2000000] = NAN;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Metrics one = compare_tensors(got, want, DType::kF16).value();
  omp_set_num_threads(std::max(2, threads));
  const Metrics many = compare_tensors(got, want, DType::kF16).value();
  omp_set_num_threads(threads);
  EXPECT_EQ(one.rel_l2, many.rel_l2);
  EXPECT_EQ(one.bias_ulp, many.bias_ulp);
  EXPECT_EQ(one.ulp_median, many.ulp_median);
  EXPECT_EQ(one.ulp_p99, many.ulp_p99);
  EXPECT_EQ(one.count, n - 1);
  EXPECT_EQ(one.non_finite_new, 1);
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 2000000) continue;
    const double d = double(got.data<float>()[i]) - double(want.data<float>()[i]);
    diff += d * d;
    ref += double(want.data<float>()[i]) * double(want.data<float>()[i]);
  }
  EXPECT_NEAR(one.rel_l2, std::sqrt(diff / ref), 1e-12 * std::sqrt(diff / ref));
  ASSERT_EQ(one.worst.size(), 5u);
  EXPECT_EQ(one.worst[0].index, Shape{n - 7});
  EXPECT_EQ(one.worst[1].index, Shape{100});
}

// Past 4 blocks the quantiles come from a parallel selection inside a sampled bracket; from 4096
// elements below that, from radix buckets of the distances' bits (both ranks in one bucket, as
// half the elements exact puts them, or in two); below 4096 from two selections, the second past
// the median's rank. They must be the order statistics a full sort gives, whatever the layout:
// noise, half the elements exact (a bracket of equal values), and errors planted at the sample's
// own stride (the bracket misses and everything is selected from).
TEST(Compare, QuantilesAreTheExactOrderStatisticsLargeAndSmall) {
  Rng rng(9, "quantiles");
  for (int64_t n : {4 * (int64_t(1) << 20) + 54321, int64_t(200003), int64_t(4096), int64_t(1000),
                    int64_t(2), int64_t(1)})
    for (int layout = 0; layout < 3; ++layout) {
      Tensor want(DType::kF32, {n}), got(DType::kF32, {n});
      for (int64_t i = 0; i < n; ++i) {
        const float w = float(rng.uniform(-2, 2));
        float e = float(rng.uniform(-1e-3, 1e-3));
        if (layout == 1 && i % 2 == 0) e = 0;
        if (layout == 2) e = i % std::max<int64_t>(1, n >> 14) == 0 ? 1e-6f : 1e-2f * float(i % 97);
        want.data<float>()[i] = w;
        got.data<float>()[i] = w + e;
      }
      std::vector<double> ulps(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const double a = got.data<float>()[i], b = want.data<float>()[i];
        ulps[std::size_t(i)] = std::abs(a - b) / ulp_at(b, DType::kF16);
      }
      std::sort(ulps.begin(), ulps.end());
      const Metrics m = compare_tensors(got, want, DType::kF16).value();
      EXPECT_EQ(m.ulp_median, ulps[std::size_t(std::lround(0.5 * double(n - 1)))]) << layout << n;
      EXPECT_EQ(m.ulp_p99, ulps[std::size_t(std::lround(0.99 * double(n - 1)))]) << layout << n;
    }
}

// ulp_at builds the spacing from the exponent's bits: the same as eps * 2^(binade) by frexp.
TEST(Compare, UlpSpacingFromBitsMatchesFrexp) {
  Rng rng(9, "ulp-bits");
  for (DType dt :
       {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kF8E4M3, DType::kF8E5M2})
    for (int i = 0; i < 20000; ++i) {
      const double x = (rng.uniform(0, 1) < 0.5 ? -1 : 1) * std::exp(rng.uniform(-80, 80));
      const double m = std::max(std::abs(x), dt == DType::kF64      ? 0x1p-1022
                                             : dt == DType::kF16    ? 0x1p-14
                                             : dt == DType::kF8E4M3 ? 0x1p-6
                                             : dt == DType::kF8E5M2 ? 0x1p-14
                                                                    : 0x1p-126);
      int e = 0;
      std::frexp(m, &e);
      ASSERT_EQ(ulp_at(x, dt), std::ldexp(dtype_epsilon(dt), e - 1)) << x << " " << dtype_name(dt);
    }
}

TEST(Compare, RefusesMismatchedShapes) {
  auto m = compare_tensors(Tensor(DType::kF32, {1, 3, 4, 4}), Tensor(DType::kF32, {1, 3, 4, 5}),
                           DType::kF16);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message(), "shape [1, 3, 4, 4] does not match the reference's [1, 3, 4, 5]");
}

TEST(Compare, UlpSpacingFollowsTheDtype) {
  EXPECT_DOUBLE_EQ(ulp_at(1.0, DType::kF16), 0x1p-10);
  EXPECT_DOUBLE_EQ(ulp_at(1.5, DType::kBF16), 0x1p-7);
  EXPECT_DOUBLE_EQ(ulp_at(0.0, DType::kF16), 0x1p-24);  // subnormal spacing
  EXPECT_DOUBLE_EQ(ulp_at(-1024.0, DType::kF32), 0x1p-13);
}

}  // namespace
}  // namespace tp

namespace tp {
namespace {

// The contract check's verdict: a value equal to a decided interval passes, any other fails,
// and an ambiguous interval admits both of its ends and nothing past them.
TEST(Contract, StoredValuesOutsideTheAdmittedIntervalAreViolations) {
  auto f16 = [](std::vector<float> v) {
    Tensor t(DType::kF32, {int64_t(v.size())});
    std::copy(v.begin(), v.end(), t.data<float>());
    return t.to(DType::kF16);
  };
  const ContractInterval admitted{f16({1.0f, 2.0f, -3.0f, 0.5f}),
                                  f16({1.0f, 2.0f, -2.998046875f, 0.5f})};
  auto ok = check_contract(f16({1.0f, 2.0f, -2.998046875f, 0.5f}), admitted);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->decided, 3);
  EXPECT_EQ(ok->ambiguous, 1);
  EXPECT_EQ(ok->violations, 0);
  // One ulp toward zero on a decided element (a truncating store), and one past an end.
  auto bad = check_contract(f16({1.0f, 1.9990234375f, -3.001953125f, 0.5f}), admitted);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->violations, 2);
  EXPECT_EQ(bad->first, Shape{1});
  EXPECT_EQ(bad->got, 1.9990234375);
  EXPECT_DOUBLE_EQ(bad->worst_ulps, 1.0);
  EXPECT_EQ(bad->toward_zero, 1);
  EXPECT_FALSE(biased_rounding(*bad)) << "two violations, one each way";
  ContractMetrics truncating;
  truncating.violations = 40;
  truncating.toward_zero = 39;
  EXPECT_TRUE(biased_rounding(truncating));
  truncating.toward_zero = 30;
  EXPECT_FALSE(biased_rounding(truncating));
  EXPECT_FALSE(check_contract(f16({1.0f}), admitted).ok()) << "shapes must match";
}

}  // namespace
}  // namespace tp
