// Our conversions against two independent implementations: the CUDA toolkit's host-side
// conversions (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h) and Eigen's half/bfloat16. Every 16-bit
// and 8-bit encoding is decoded; encoding is checked at every rounding midpoint (where ties
// to even decide), one float either side of it, and on random floats.
#include "harness/core/dtype.h"

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "harness/core/rng.h"
#include "harness/core/tensor.h"

#ifdef TWINPATH_TEST_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace tp {
namespace {

float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Equal as encodings, with any NaN equal to any NaN (implementations pick different NaNs).
void expect_same_encoding(DType dt, uint32_t ours, uint32_t theirs, double input, const char* who) {
  const bool ours_nan = std::isnan(decode_narrow(dt, ours)),
             theirs_nan = std::isnan(decode_narrow(dt, theirs));
  if (ours_nan || theirs_nan) {
    EXPECT_EQ(ours_nan, theirs_nan) << dtype_name(dt) << " input " << input << " vs " << who;
  } else {
    EXPECT_EQ(ours, theirs) << dtype_name(dt) << " input " << std::hexfloat << input << " vs "
                            << who;
  }
}

// Inputs that exercise rounding: every value, every midpoint between neighbours (and past the
// largest finite value), and the floats just either side of each midpoint.
std::vector<float> rounding_probes(DType dt, int bits) {
  std::vector<float> probes;
  const uint32_t count = 1u << (bits - 1);  // non-negative encodings
  for (uint32_t e = 0; e + 1 < count; ++e) {
    const double v = decode_narrow(dt, e), u = decode_narrow(dt, e + 1);
    if (!std::isfinite(v)) continue;
    const double next =
        std::isfinite(u) ? u : v + (v - decode_narrow(dt, e - 1));  // a virtual next
    const float mid = float((v + next) / 2);
    for (float f : {float(v), mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(f);
      probes.push_back(-f);
    }
  }
  for (float f : {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f,
                  1e-30f, std::numeric_limits<float>::denorm_min()})
    probes.push_back(f);
  Rng rng(7, dtype_name(dt));
  for (int i = 0; i < 1 << 20; ++i) probes.push_back(bits_float(uint32_t(rng.next())));
  return probes;
}

TEST(DType, NamesAndLimits) {
  EXPECT_EQ(dtype_max_finite(DType::kF16), 65504.0);
  EXPECT_EQ(dtype_max_finite(DType::kBF16), 3.3895313892515355e38);
  EXPECT_EQ(dtype_max_finite(DType::kF8E4M3), 448.0);
  EXPECT_EQ(dtype_max_finite(DType::kF8E5M2), 57344.0);
  EXPECT_EQ(dtype_epsilon(DType::kF16), std::ldexp(1.0, -10));
  EXPECT_EQ(dtype_epsilon(DType::kBF16), std::ldexp(1.0, -7));
  for (const char* n : {"f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2"}) {
    auto dt = parse_dtype(n);
    ASSERT_TRUE(dt.ok());
    EXPECT_STREQ(dtype_name(dt.value()), n);
  }
  auto bad = parse_dtype("fp16");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("f16"), std::string::npos);
}

TEST(DType, OverflowPerType) {
  // f16/bf16: past max rounds to inf (65520 is the tie between 65504 and 2^16).
  EXPECT_EQ(encode_narrow(DType::kF16, 65519.0), 0x7BFFu);
  EXPECT_EQ(encode_narrow(DType::kF16, 65520.0), 0x7C00u);
  EXPECT_EQ(encode_narrow(DType::kF16, -1e9), 0xFC00u);
  // e4m3fn has no inf: non-saturating overflow is NaN, saturating clamps; NaN stays NaN.
  EXPECT_TRUE(std::isnan(decode_narrow(DType::kF8E4M3, encode_narrow(DType::kF8E4M3, 1000.0))));
  EXPECT_EQ(
      decode_narrow(DType::kF8E4M3, encode_narrow(DType::kF8E4M3, 1000.0, Saturation::kSaturate)),
      448.0);
  EXPECT_EQ(decode_narrow(DType::kF8E4M3,
                          encode_narrow(DType::kF8E4M3, -INFINITY, Saturation::kSaturate)),
            -448.0);
  EXPECT_TRUE(std::isnan(
      decode_narrow(DType::kF8E4M3, encode_narrow(DType::kF8E4M3, NAN, Saturation::kSaturate))));
  // e5m2 has inf.
  EXPECT_EQ(decode_narrow(DType::kF8E5M2, encode_narrow(DType::kF8E5M2, 1e6)), INFINITY);
  EXPECT_EQ(
      decode_narrow(DType::kF8E5M2, encode_narrow(DType::kF8E5M2, 1e6, Saturation::kSaturate)),
      57344.0);
  // Subnormals and signed zero.
  EXPECT_EQ(decode_narrow(DType::kF16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(decode_narrow(DType::kF8E4M3, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(encode_narrow(DType::kF16, -0.0), 0x8000u);
}

TEST(DType, RoundTripEveryEncoding) {
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2}) {
    const uint32_t n = dtype_size(dt) == 2 ? 1u << 16 : 1u << 8;
    for (uint32_t b = 0; b < n; ++b) {
      const double v = decode_narrow(dt, b);
      if (std::isnan(v)) continue;
      EXPECT_EQ(encode_narrow(dt, v), b) << dtype_name(dt) << " encoding " << b;
    }
  }
}

TEST(DType, ConvertElementsRoundsOnceFromDouble) {
  // 1 + 2^-11 + 2^-40 is just above the f16 tie at 1 + 2^-11: one rounding goes up; rounding
  // through f32 first would land on the tie and go to even (down).
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  uint16_t h = 0;
  convert_elements(&x, DType::kF64, &h, DType::kF16, 1);
  EXPECT_EQ(decode_narrow(DType::kF16, h), 1.0 + std::ldexp(1.0, -10));
}

// The fast float narrowing (convert_elements' f32 -> f16/bf16 loops) against encode_narrow:
// every 251st bit pattern (both signs, every binade, subnormals, the overflow ties, NaNs) and
// the boundaries by name. TWINPATH_EXHAUSTIVE=1 checks all 2^32 floats (about a minute; run
// once for the commit that added the fast path: 0 mismatches).
bool fast_narrowing_matches(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return f32_to_f16_bits(x) == uint16_t(encode_narrow(DType::kF16, x)) &&
         f32_to_bf16_bits(x) == uint16_t(encode_narrow(DType::kBF16, x));
}

TEST(DType, FastF32NarrowingMatchesEncodeNarrow) {
  for (float named : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 0x1p-14f, 0x1p-24f,
                      0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1.ff8p-15f, 3.3895314e38f,
                      std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                      std::numeric_limits<float>::denorm_min(), std::nanf("")}) {
    uint32_t bits;
    std::memcpy(&bits, &named, sizeof bits);
    EXPECT_TRUE(fast_narrowing_matches(bits)) << named;
    EXPECT_TRUE(fast_narrowing_matches(bits | 0x80000000u)) << -named;
  }
  const bool all = std::getenv("TWINPATH_EXHAUSTIVE") != nullptr;
  const int64_t step = all ? 1 : 251, end = int64_t(1) << 32;
  int64_t mismatches = 0, first = end;
#pragma omp parallel for reduction(+ : mismatches) reduction(min : first) schedule(static)
  for (int64_t b = 0; b < end; b += step)
    if (!fast_narrowing_matches(uint32_t(b))) {
      ++mismatches;
      first = std::min(first, b);
    }
  EXPECT_EQ(mismatches, 0) << "first at bits 0x" << std::hex << first;
}

TEST(DType, MatchesEigen) {
  for (uint32_t b = 0; b < (1u << 16); ++b) {
    const double ours = decode_narrow(DType::kF16, b);
    const float eigen = float(Eigen::numext::bit_cast<Eigen::half>(uint16_t(b)));
    if (std::isnan(ours))
      EXPECT_TRUE(std::isnan(eigen));
    else
      EXPECT_EQ(float(ours), eigen) << b;
    const double ours_bf = decode_narrow(DType::kBF16, b);
    const float eigen_bf = float(Eigen::numext::bit_cast<Eigen::bfloat16>(uint16_t(b)));
    if (std::isnan(ours_bf))
      EXPECT_TRUE(std::isnan(eigen_bf));
    else
      EXPECT_EQ(float(ours_bf), eigen_bf) << b;
  }
  for (float f : rounding_probes(DType::kF16, 16))
    expect_same_encoding(DType::kF16, encode_narrow(DType::kF16, f),
                         Eigen::numext::bit_cast<uint16_t>(Eigen::half(f)), f, "Eigen::half");
  for (float f : rounding_probes(DType::kBF16, 16))
    expect_same_encoding(DType::kBF16, encode_narrow(DType::kBF16, f),
                         Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(f)), f,
                         "Eigen::bfloat16");
}

#ifdef TWINPATH_TEST_CUDA_HEADERS
TEST(DType, MatchesCudaHostConversions16) {
  for (uint32_t b = 0; b < (1u << 16); ++b) {
    __half_raw hr;
    hr.x = uint16_t(b);
    const float cuda = __half2float(__half(hr));
    const double ours = decode_narrow(DType::kF16, b);
    if (std::isnan(ours))
      EXPECT_TRUE(std::isnan(cuda));
    else
      EXPECT_EQ(float(ours), cuda) << b;
    __nv_bfloat16_raw br;
    br.x = uint16_t(b);
    const float cuda_bf = __bfloat162float(__nv_bfloat16(br));
    const double ours_bf = decode_narrow(DType::kBF16, b);
    if (std::isnan(ours_bf))
      EXPECT_TRUE(std::isnan(cuda_bf));
    else
      EXPECT_EQ(float(ours_bf), cuda_bf) << b;
  }
  for (float f : rounding_probes(DType::kF16, 16)) {
    expect_same_encoding(DType::kF16, encode_narrow(DType::kF16, f),
                         __half_raw(__float2half_rn(f)).x, f, "__float2half_rn");
    // From double: the probe nudged by less than a float ulp must still round once.
    const double d = double(f) + double(f) * 0x1p-40;
    expect_same_encoding(DType::kF16, encode_narrow(DType::kF16, d), __half_raw(__double2half(d)).x,
                         d, "__double2half");
  }
  for (float f : rounding_probes(DType::kBF16, 16)) {
    expect_same_encoding(DType::kBF16, encode_narrow(DType::kBF16, f),
                         __nv_bfloat16_raw(__float2bfloat16_rn(f)).x, f, "__float2bfloat16_rn");
    const double d = double(f) - double(f) * 0x1p-40;
    expect_same_encoding(DType::kBF16, encode_narrow(DType::kBF16, d),
                         __nv_bfloat16_raw(__double2bfloat16(d)).x, d, "__double2bfloat16");
  }
}

TEST(DType, MatchesCudaHostConversionsFp8) {
  struct Kind {
    DType dt;
    __nv_fp8_interpretation_t cuda;
  };
  for (Kind k : {Kind{DType::kF8E4M3, __NV_E4M3}, Kind{DType::kF8E5M2, __NV_E5M2}}) {
    for (uint32_t b = 0; b < 256; ++b) {
      const float cuda =
          __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(b), k.cuda)));
      const double ours = decode_narrow(k.dt, b);
      if (std::isnan(ours))
        EXPECT_TRUE(std::isnan(cuda)) << b;
      else
        EXPECT_EQ(float(ours), cuda) << b;
    }
    for (float f : rounding_probes(k.dt, 8)) {
      expect_same_encoding(k.dt, encode_narrow(k.dt, f, Saturation::kNonSaturating),
                           __nv_cvt_float_to_fp8(f, __NV_NOSAT, k.cuda), f,
                           "__nv_cvt_float_to_fp8 NOSAT");
      expect_same_encoding(k.dt, encode_narrow(k.dt, f, Saturation::kSaturate),
                           __nv_cvt_float_to_fp8(f, __NV_SATFINITE, k.cuda), f,
                           "__nv_cvt_float_to_fp8 SATFINITE");
      const double d = double(f) + double(f) * 0x1p-40;
      expect_same_encoding(k.dt, encode_narrow(k.dt, d, Saturation::kSaturate),
                           __nv_cvt_double_to_fp8(d, __NV_SATFINITE, k.cuda), d,
                           "__nv_cvt_double_to_fp8");
    }
  }
}
#endif

}  // namespace
}  // namespace tp

namespace tp {
namespace {

// A default-constructed tensor (a placeholder in a struct) copies and assigns as empty.
TEST(Tensor, DefaultConstructedCopiesAsEmpty) {
  const Tensor empty;
  Tensor copy = empty;
  EXPECT_EQ(copy.raw(), nullptr);
  Tensor filled(DType::kF32, {2, 3});
  filled = empty;
  EXPECT_EQ(filled.raw(), nullptr);
  std::vector<Tensor> many{Tensor(), Tensor(DType::kF16, {4})};
  EXPECT_EQ(many[0].raw(), nullptr);
  EXPECT_NE(many[1].raw(), nullptr);
}

}  // namespace
}  // namespace tp
