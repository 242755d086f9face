// Pointwise ops (SiLU, ReLU, the tanh clamp, affine, clamp, add), nearest 2x upsampling and
// channel slicing. Math in double, one rounding to T.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "harness/core/parallel.h"
#include "reference/ops/ops.h"
#include "reference/ops/vector_exp.h"

namespace tp::ref {
namespace {

template <class T, class F>
Tensor map_unary(const Tensor& x, F f) {
  Tensor out = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const T* in = x.data<T>();
  T* o = out.data<T>();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) o[i] = T(f(double(in[i])));
  return out;
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// SiLU of kSiluLanes fp32 values at a time in double: glibc's vector exp (libmvec, within 1 ulp in
// double like the scalar exp; its AVX-512 variant eight at a time, its AVX2 one four) leaves one
// rounding, to fp32, as the scalar loop does.
#if defined(__AVX512F__)
constexpr int64_t kSiluLanes = 8;
void silu_lanes(const float* in, float* out) {
  const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(in));
  const __m512d e = _ZGVeN8v_exp(_mm512_sub_pd(_mm512_setzero_pd(), v));
  _mm256_storeu_ps(out, _mm512_cvtpd_ps(_mm512_div_pd(v, _mm512_add_pd(_mm512_set1_pd(1.0), e))));
}
#elif defined(__AVX2__)
constexpr int64_t kSiluLanes = 4;
void silu_lanes(const float* in, float* out) {
  const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(in));
  const __m256d e = _ZGVdN4v_exp(_mm256_sub_pd(_mm256_setzero_pd(), v));
  _mm_storeu_ps(out, _mm256_cvtpd_ps(_mm256_div_pd(v, _mm256_add_pd(_mm256_set1_pd(1.0), e))));
}
#else
constexpr int64_t kSiluLanes = 1;
void silu_lanes(const float* in, float* out) { *out = float(silu(double(*in))); }
#endif

Tensor silu_f32(const Tensor& x) {
  Tensor out = Tensor::uninitialized(DType::kF32, x.shape());
  const float* in = x.data<float>();
  float* o = out.data<float>();
  const int64_t n = x.numel(), vectors = n / kSiluLanes;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < vectors; ++i) silu_lanes(in + kSiluLanes * i, o + kSiluLanes * i);
  for (int64_t i = kSiluLanes * vectors; i < n; ++i) o[i] = float(silu(double(in[i])));
  return out;
}

}  // namespace

template <class T>
Tensor elementwise(OpKind kind, const Tensor& x, const OpAttrs& a) {
  switch (kind) {
    case OpKind::kSilu:
      if constexpr (std::is_same_v<T, float>) return silu_f32(x);
      return map_unary<T>(x, silu);
    case OpKind::kRelu:
      return map_unary<T>(x, [](double v) { return v > 0 ? v : 0.0; });
    case OpKind::kTanhClamp:
      return map_unary<T>(x, [s = a.scale](double v) { return std::tanh(v / s) * s; });
    case OpKind::kAffine:
      return map_unary<T>(x, [s = a.scale, b = a.shift](double v) { return v * s + b; });
    case OpKind::kClamp:
      // NaN stays NaN, as torch.clamp.
      return map_unary<T>(x, [lo = a.lo, hi = a.hi](double v) {
        return std::isnan(v) ? v : std::clamp(v, lo, hi);
      });
    default:
      break;
  }
  TP_CHECK(false, std::string("not a unary op: ") + op_kind_name(kind));
  return {};
}

// torch's gelu(approximate="tanh"), 0.5 x (1 + tanh z) with z = sqrt(2/pi) (x + 0.044715 x^3),
// as the same value x / (1 + exp(-2z)), in double blocks through the vector exp; one rounding to
// T. (Which elements take the vector exp depends on the size alone, not on the threads.)
template <class T>
Tensor gelu_tanh(const Tensor& x) {
  Tensor out = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const T* in = x.data<T>();
  T* o = out.data<T>();
  constexpr int64_t kBlock = 256;
  const double two_c = 2 * std::sqrt(2 / M_PI), cubic = 0.044715;
  const int64_t n = x.numel(), blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t b = 0; b < blocks; ++b) {
    double e[kBlock];
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    for (int64_t j = 0; j < len; ++j) {
      const double v = double(in[i0 + j]);
      e[j] = -(two_c * (v + cubic * (v * (v * v))));
    }
    exp_in_place(e, len);
    for (int64_t j = 0; j < len; ++j) o[i0 + j] = T(double(in[i0 + j]) / (1.0 + e[j]));
  }
  return out;
}

template <class T>
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  if (tanh_approximation) return gelu_tanh<T>(x);
  return map_unary<T>(x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
}

template <class T>
Tensor upsample_nearest2x(const Tensor& x) {
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor out = Tensor::uninitialized(dtype_of<T>(), {x.dim(0), x.dim(1), 2 * h, 2 * w});
#pragma omp parallel for schedule(static) if (4 * x.numel() >= kParallelElements)
  for (int64_t p = 0; p < planes; ++p) {
    const T* in = x.data<T>() + p * h * w;
    T* o = out.data<T>() + p * 4 * h * w;
    for (int64_t y = 0; y < 2 * h; ++y) {
      const T* row = in + (y / 2) * w;
      T* orow = o + y * 2 * w;
      for (int64_t xx = 0; xx < 2 * w; ++xx) orow[xx] = row[xx / 2];
    }
  }
  return out;
}

#define TP_INSTANTIATE(T)                                                \
  template Tensor elementwise<T>(OpKind, const Tensor&, const OpAttrs&); \
  template Tensor gelu<T>(const Tensor&, bool);                          \
  template Tensor upsample_nearest2x<T>(const Tensor&);
TP_INSTANTIATE(float)
TP_INSTANTIATE(double)
#undef TP_INSTANTIATE

}  // namespace tp::ref
