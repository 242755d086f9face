// Pointwise epilogue ops, residual add, channel slices, standalone nearest upsample, and the
// one rounding of a group's outputs into their storage dtype.
#include "compiled/kernels/cuda/device_io.cuh"

namespace tp::compiled::cuda {
namespace {

__global__ void pointwise_kernel(Src x, int64_t n, PointwiseArgs a, float* out) {
  TP_GRID_STRIDE(i, n) {
    const float v = load(x, i);
    float r = v;
    switch (a.op) {
      case Pointwise::kSilu:
        if (a.rounded == Storage::kF32) {
          r = silu(v);
        } else {  // the silu-in-activation-dtype fault
          const float h = round_to(a.rounded, v);
          r = round_to(a.rounded, h / round_to(a.rounded, 1.0f + round_to(a.rounded, expf(-h))));
        }
        break;
      case Pointwise::kRelu:
        r = v > 0 ? v : 0.0f;
        break;
      case Pointwise::kTanhClamp:
        r = tanhf(v / a.scale) * a.scale;
        break;
      case Pointwise::kAffine:
        r = v * a.scale + a.shift;
        break;
      case Pointwise::kClamp:
        r = fminf(fmaxf(v, a.lo), a.hi);
        break;
      case Pointwise::kGelu:  // 0.5 x (1 + erf(x / sqrt 2)), the emulation's order
        r = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
        break;
      case Pointwise::kGeluTanh: {  // v / (1 + exp(-2z)), the emulation's order (gelu_tanh)
        const float minus_2z = fmaf(0.044715f * v * v, v, v) * -1.59576912160573071f;
        r = v / (1.0f + expf(minus_2z));
        break;
      }
    }
    out[i] = r;
  }
}

__global__ void add_kernel(Src a, Src b, int64_t n, float* out) {
  TP_GRID_STRIDE(i, n) out[i] = load(a, i) + load(b, i);
}

__global__ void slice_kernel(Src x, int64_t pixels, int64_t c, int begin, int width, float* out) {
  TP_GRID_STRIDE(i, pixels * width) out[i] = load(x, (i / width) * c + begin + i % width);
}

__global__ void upsample_kernel(Src x, Dims s, float* out) {
  const int64_t total = s.b * 4 * s.h * s.w * s.c;
  TP_GRID_STRIDE(i, total) {
    const int64_t ch = i % s.c, xx = (i / s.c) % (2 * s.w), y = (i / (s.c * 2 * s.w)) % (2 * s.h),
                  n = i / (s.c * 4 * s.w * s.h);
    out[i] = load(x, ((n * s.h + y / 2) * s.w + xx / 2) * s.c + ch);
  }
}

__global__ void store_kernel(const float* src, int64_t n, Storage s, void* dst) {
  TP_GRID_STRIDE(i, n) store(dst, s, i, src[i]);
}

__global__ void store_truncated_kernel(const float* src, int64_t n, Storage s, void* dst) {
  TP_GRID_STRIDE(i, n) {
    if (s == Storage::kF16)
      static_cast<__half*>(dst)[i] = __float2half_rz(src[i]);
    else if (s == Storage::kBF16)
      static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rz(src[i]);
    else
      static_cast<float*>(dst)[i] = src[i];
  }
}

__global__ void widen_kernel(Src x, int64_t n, float* dst) {
  TP_GRID_STRIDE(i, n) dst[i] = load(x, i);
}

}  // namespace

cudaError_t pointwise(Src x, int64_t n, const PointwiseArgs& args, float* out,
                      cudaStream_t stream) {
  pointwise_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, args, out);
  return cudaGetLastError();
}

cudaError_t add(Src a, Src b, int64_t n, float* out, cudaStream_t stream) {
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n, out);
  return cudaGetLastError();
}

cudaError_t slice_channels(Src x, int64_t pixels, int64_t c, int begin, int end, float* out,
                           cudaStream_t stream) {
  slice_kernel<<<blocks_for(pixels * (end - begin)), kThreads, 0, stream>>>(x, pixels, c, begin,
                                                                            end - begin, out);
  return cudaGetLastError();
}

cudaError_t upsample_nearest2x(Src x, Dims xs, float* out, cudaStream_t stream) {
  upsample_kernel<<<blocks_for(4 * xs.numel()), kThreads, 0, stream>>>(x, xs, out);
  return cudaGetLastError();
}

cudaError_t store_rounded(const float* src, int64_t n, Storage storage, void* dst,
                          cudaStream_t stream) {
  store_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, n, storage, dst);
  return cudaGetLastError();
}

cudaError_t store_truncated(const float* src, int64_t n, Storage storage, void* dst,
                            cudaStream_t stream) {
  store_truncated_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, n, storage, dst);
  return cudaGetLastError();
}

cudaError_t widen(Src x, int64_t n, float* dst, cudaStream_t stream) {
  widen_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, dst);
  return cudaGetLastError();
}

}  // namespace tp::compiled::cuda
