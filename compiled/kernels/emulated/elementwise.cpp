// Pointwise ops of fused-group epilogues, in fp32 on channels-last tensors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

namespace tp::compiled::emulated {

Tensor pointwise(OpKind kind, const OpAttrs& a, Tensor x) {
  TP_CHECK(kind == OpKind::kSilu || kind == OpKind::kRelu || kind == OpKind::kTanhClamp ||
               kind == OpKind::kAffine || kind == OpKind::kClamp,
           std::string("not a unary op: ") + op_kind_name(kind));
  float* p = x.data<float>();
  const int64_t n = x.numel();
  const float scale = float(a.scale), shift = float(a.shift), lo = float(a.lo), hi = float(a.hi);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float v = p[i];
    switch (kind) {
      case OpKind::kSilu:
        p[i] = v / (1.0f + std::exp(-v));
        break;
      case OpKind::kRelu:
        p[i] = v > 0 ? v : 0.0f;
        break;
      case OpKind::kTanhClamp:
        p[i] = std::tanh(v / scale) * scale;
        break;
      case OpKind::kAffine:
        p[i] = v * scale + shift;
        break;
      case OpKind::kClamp:
        p[i] = std::min(std::max(v, lo), hi);
        break;
      default:
        break;
    }
  }
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
