// Pointwise ops of fused-group epilogues, in fp32 on channels-last tensors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace tp::compiled::emulated {

namespace {

// y[i] = f(x[i]) in place, one loop per op so each vectorizes.
template <class F>
void map_in_place(float* p, int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) p[i] = f(p[i]);
}

// portable_expf's steps (Cody-Waite reduction, Cephes' expf polynomial), shared by the scalar
// and vector forms so each lane computes exactly what the scalar code does.
constexpr float kExpLo = -104.0f, kExpHi = 89.0f;  // past them: 0 and inf
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo, hi exact
constexpr float kP[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                        4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
using Vec = __m512;
using IVec = __m512i;
Vec load(const float* p) { return _mm512_loadu_ps(p); }
void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
Vec set1(float x) { return _mm512_set1_ps(x); }
Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
Vec clamp(Vec x) { return _mm512_min_ps(_mm512_max_ps(x, set1(kExpLo)), set1(kExpHi)); }
Vec nearest(Vec x) {
  return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
IVec to_int(Vec x) { return _mm512_cvtps_epi32(x); }
Vec pow2(IVec e) {  // 2^e for e in [-126, 127]
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
}
IVec half_down(IVec e) { return _mm512_srai_epi32(e, 1); }
IVec isub(IVec a, IVec b) { return _mm512_sub_epi32(a, b); }
Vec keep_nan(Vec x, Vec y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int64_t kLanes = 8;
using Vec = __m256;
using IVec = __m256i;
Vec load(const float* p) { return _mm256_loadu_ps(p); }
void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
Vec set1(float x) { return _mm256_set1_ps(x); }
Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
Vec clamp(Vec x) { return _mm256_min_ps(_mm256_max_ps(x, set1(kExpLo)), set1(kExpHi)); }
Vec nearest(Vec x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
IVec to_int(Vec x) { return _mm256_cvtps_epi32(x); }
Vec pow2(IVec e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}
IVec half_down(IVec e) { return _mm256_srai_epi32(e, 1); }
IVec isub(IVec a, IVec b) { return _mm256_sub_epi32(a, b); }
Vec keep_nan(Vec x, Vec y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
#else
constexpr int64_t kLanes = 0;
#endif

#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
// portable_expf on kLanes values: the same operations, in the same order, as the scalar code.
Vec vector_expf(Vec x0) {
  const Vec x = clamp(x0);
  const Vec n = nearest(mul(x, set1(kLog2e)));
  const Vec minus_n = sub(set1(0.0f), n);
  Vec r = fma(minus_n, set1(kLn2Hi), x);
  r = fma(minus_n, set1(kLn2Lo), r);
  Vec p = set1(kP[0]);
  for (int i = 1; i < 6; ++i) p = fma(p, r, set1(kP[i]));
  const Vec y = add(fma(p, mul(r, r), r), set1(1.0f));
  const IVec e = to_int(n), h = half_down(e);
  return keep_nan(x0, mul(mul(y, pow2(h)), pow2(isub(e, h))));
}
#endif

// SiLU in fp32: v / (1 + portable_expf(-v)).
float silu(float v) { return v / (1.0f + portable_expf(-v)); }

// GELU's tanh form in fp32 as v / (1 + portable_expf(-2z)), z = sqrt(2/pi) (v + 0.044715 v^3):
// 0.5 v (1 + tanh z) without its cancellation where tanh z nears -1.
constexpr float kCubic = 0.044715f, kMinusTwoSqrt2OverPi = -1.59576912160573071f;
float gelu_tanh(float v) {
  const float minus_2z = std::fma((kCubic * v) * v, v, v) * kMinusTwoSqrt2OverPi;
  return v / (1.0f + portable_expf(minus_2z));
}

#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
// The same operations in the same order, kLanes at a time.
Vec silu_lanes(Vec v) { return div(v, add(set1(1.0f), vector_expf(sub(set1(0.0f), v)))); }
Vec gelu_tanh_lanes(Vec v) {
  const Vec minus_2z = mul(fma(mul(mul(set1(kCubic), v), v), v, v), set1(kMinusTwoSqrt2OverPi));
  return div(v, add(set1(1.0f), vector_expf(minus_2z)));
}

// y[i] = kScalar(x[i]) (y may be x), kLanes at a time through kVector: the same bits as the
// scalar loop on AVX2 and AVX-512 alike.
template <Vec (*kVector)(Vec), float (*kScalar)(float)>
void map_lanes(const float* x, int64_t n, float* y) {
  const int64_t vectors = n / kLanes;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < vectors; ++i) store(y + kLanes * i, kVector(load(x + kLanes * i)));
  for (int64_t i = kLanes * vectors; i < n; ++i) y[i] = kScalar(x[i]);
}
#define TP_MAP_LANES(f, x, n, y) map_lanes<f##_lanes, f>(x, n, y)
#else
template <float (*kScalar)(float)>
void map_lanes(const float* x, int64_t n, float* y) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] = kScalar(x[i]);
}
#define TP_MAP_LANES(f, x, n, y) map_lanes<f>(x, n, y)
#endif

void silu_in_place(float* p, int64_t n) { TP_MAP_LANES(silu, p, n, p); }

}  // namespace

float portable_expf(float x0) {
  if (x0 != x0) return x0;
  const float x = std::min(std::max(x0, kExpLo), kExpHi);
  const float n = std::nearbyint(x * kLog2e);
  const float minus_n = 0.0f - n;
  float r = std::fma(minus_n, kLn2Hi, x);
  r = std::fma(minus_n, kLn2Lo, r);
  float p = kP[0];
  for (int i = 1; i < 6; ++i) p = std::fma(p, r, kP[i]);
  const float y = std::fma(p, r * r, r) + 1.0f;
  const int e = int(n), h = e >> 1;
  auto pow2 = [](int k) {  // 2^k for k in [-126, 127]
    const uint32_t bits = uint32_t(k + 127) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  return (y * pow2(h)) * pow2(e - h);
}

void gelu_tanh_values(const float* x, int64_t n, float* y) { TP_MAP_LANES(gelu_tanh, x, n, y); }

void portable_expf_in_place(float* p, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
  for (; i + kLanes <= n; i += kLanes) store(p + i, vector_expf(load(p + i)));
#endif
  for (; i < n; ++i) p[i] = portable_expf(p[i]);
}

Tensor pointwise(OpKind kind, const OpAttrs& a, Tensor x) {
  float* p = x.data<float>();
  const int64_t n = x.numel();
  const float scale = float(a.scale), shift = float(a.shift), lo = float(a.lo), hi = float(a.hi);
  switch (kind) {
    case OpKind::kSilu:
      silu_in_place(p, n);
      return x;
    case OpKind::kRelu:
      map_in_place(p, n, [](float v) { return v > 0 ? v : 0.0f; });
      return x;
    case OpKind::kTanhClamp:
      map_in_place(p, n, [=](float v) { return std::tanh(v / scale) * scale; });
      return x;
    case OpKind::kAffine:
      map_in_place(p, n, [=](float v) { return v * scale + shift; });
      return x;
    case OpKind::kClamp:
      map_in_place(p, n, [=](float v) { return std::min(std::max(v, lo), hi); });
      return x;
    default:
      break;
  }
  TP_CHECK(false, std::string("not a unary op: ") + op_kind_name(kind));
  return x;
}

Tensor silu_rounded_to(DType dt, Tensor x) {
  map_in_place(x.data<float>(), x.numel(), [dt](float v) {
    const float h = round_to(dt, v);
    const float d = round_to(dt, 1.0f + round_to(dt, std::exp(-h)));
    return round_to(dt, h / d);
  });
  return x;
}

Tensor slice_channels(const Tensor& x, int begin, int end) {
  const int64_t pixels = x.dim(0) * x.dim(1) * x.dim(2), c = x.dim(3), w = end - begin;
  Tensor out = Tensor::uninitialized(DType::kF32, {x.dim(0), x.dim(1), x.dim(2), w});
  for (int64_t p = 0; p < pixels; ++p)
    std::memcpy(out.data<float>() + p * w, x.data<float>() + p * c + begin,
                std::size_t(w) * sizeof(float));
  return out;
}

Tensor upsample_nearest2x(const Tensor& x) {
  const int64_t b = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  Tensor out = Tensor::uninitialized(DType::kF32, {b, 2 * h, 2 * w, c});
  for (int64_t n = 0; n < b; ++n)
    for (int64_t y = 0; y < 2 * h; ++y)
      for (int64_t xx = 0; xx < 2 * w; ++xx)
        std::memcpy(out.data<float>() + ((n * 2 * h + y) * 2 * w + xx) * c,
                    x.data<float>() + ((n * h + y / 2) * w + xx / 2) * c,
                    std::size_t(c) * sizeof(float));
  return out;
}

}  // namespace tp::compiled::emulated
