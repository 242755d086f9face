// Pointwise ops of fused-group epilogues, in fp32 on channels-last tensors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

#if defined(__AVX512F__)
#include <immintrin.h>
extern "C" __m512 _ZGVeN16v_expf(__m512);  // glibc's libmvec, AVX-512 variant of expf
#endif

namespace tp::compiled::emulated {

namespace {

// y[i] = f(x[i]) in place, one loop per op so each vectorizes.
template <class F>
void map_in_place(float* p, int64_t n, F f) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) p[i] = f(p[i]);
}

float silu(float v) { return v / (1.0f + std::exp(-v)); }

// SiLU in fp32, sixteen at a time where the build targets AVX-512: glibc's vector expf (libmvec,
// within 1 ulp of exp like the scalar expf) in place of the scalar call, the same fp32 quotient.
void silu_in_place(float* p, int64_t n) {
#if defined(__AVX512F__)
  const int64_t vectors = n / 16;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < vectors; ++i) {
    const __m512 v = _mm512_loadu_ps(p + 16 * i);
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_storeu_ps(p + 16 * i, _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  }
  for (int64_t i = 16 * vectors; i < n; ++i) p[i] = silu(p[i]);
#else
  map_in_place(p, n, silu);
#endif
}

}  // namespace

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

Tensor add(const Tensor& a, const Tensor& b) {
  TP_CHECK(a.shape() == b.shape(),
           "add of " + shape_string(a.shape()) + " and " + shape_string(b.shape()));
  Tensor out = Tensor::uninitialized(DType::kF32, a.shape());
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* o = out.data<float>();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
  return out;
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
