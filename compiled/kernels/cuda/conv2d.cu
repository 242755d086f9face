// The conv group's kernels around its GEMM: the patch gather for cuBLAS (with the fused nearest
// 2x upsample folded into the indexing, so the upsampled tensor is never stored), the
// per-channel scale and bias applied to the fp32 accumulator, and the fused kernel set's
// epilogue (scale, bias, residual and the rounding store in one pass).
#include "compiled/kernels/cuda/device_io.cuh"

namespace tp::compiled::cuda {
namespace {

__device__ __forceinline__ int64_t source_index(int64_t i, int64_t extent, Upsample up) {
  switch (up) {
    case Upsample::kNearest2x:
      return i / 2;
    case Upsample::kNearest2xOffByOne:
      return min((i + 1) / 2, extent - 1);
    default:
      return i;
  }
}

__global__ void im2col_kernel(Src x, Dims xs, int64_t n, int64_t y0, int64_t rows, ConvGeometry g,
                              Upsample up, Storage out, void* patches) {
  const int64_t k = int64_t(g.kh) * g.kw * xs.c;
  const int64_t total = rows * g.wo * k;
  TP_GRID_STRIDE(i, total) {
    const int64_t ci = i % xs.c;
    const int64_t tap = (i / xs.c) % (int64_t(g.kh) * g.kw);
    const int64_t q = i / k;
    const int64_t oy = y0 + q / g.wo, ox = q % g.wo;
    const int64_t iy = oy * g.stride - g.pad_top + tap / g.kw,
                  ix = ox * g.stride - g.pad_left + tap % g.kw;
    float v = 0.0f;
    if (iy >= 0 && iy < g.hin && ix >= 0 && ix < g.win) {
      const int64_t sy = source_index(iy, xs.h, up), sx = source_index(ix, xs.w, up);
      v = load(x, ((n * xs.h + sy) * xs.w + sx) * xs.c + ci);
    }
    store(patches, out, i, v);  // exact: the source values are representable in `out`
  }
}

__global__ void scale_bias_kernel(float* acc, int64_t n, int64_t channels, int64_t inner,
                                  const float* scale, const float* bias) {
  TP_GRID_STRIDE(i, n) {
    const int64_t o = (i / inner) % channels;
    float v = acc[i];
    if (scale) v = v * scale[o];
    if (bias) v = v + bias[o];
    acc[i] = v;
  }
}

__device__ __forceinline__ void epilogue_element(const float* acc, int64_t i, int64_t o,
                                                 const float* scale, const float* bias,
                                                 Src residual, Storage storage, void* out) {
  float v = acc[i];
  if (scale) v = v * scale[o];
  if (bias) v = v + bias[o];
  if (residual.data) v = v + load(residual, i);
  store(out, storage, i, v);
}

// `width` consecutive channels of one position per thread (co a multiple of width): one index
// division per `width` elements.
template <int width>
__global__ void epilogue_kernel(const float* acc, int64_t n, int64_t co, const float* scale,
                                const float* bias, Src residual, Storage storage, void* out) {
  TP_GRID_STRIDE(v, n / width) {
    const int64_t i0 = v * width, o0 = i0 % co;
#pragma unroll
    for (int j = 0; j < width; ++j)
      epilogue_element(acc, i0 + j, o0 + j, scale, bias, residual, storage, out);
  }
}

}  // namespace

cudaError_t conv_epilogue(const float* acc, int64_t m, int64_t co, const float* scale,
                          const float* bias, Src residual, Storage storage, void* out,
                          cudaStream_t stream) {
  if (co % 8 == 0)
    epilogue_kernel<8><<<blocks_for(m * co / 8), kThreads, 0, stream>>>(
        acc, m * co, co, scale, bias, residual, storage, out);
  else
    epilogue_kernel<1><<<blocks_for(m * co), kThreads, 0, stream>>>(acc, m * co, co, scale, bias,
                                                                    residual, storage, out);
  return cudaGetLastError();
}

cudaError_t im2col(Src x, Dims xs, int64_t n, int64_t y0, int64_t rows, const ConvGeometry& g,
                   Upsample up, Storage out, void* patches, cudaStream_t stream) {
  const int64_t total = rows * g.wo * int64_t(g.kh) * g.kw * xs.c;
  im2col_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, xs, n, y0, rows, g, up, out,
                                                            patches);
  return cudaGetLastError();
}

cudaError_t scale_bias_strided(float* acc, int64_t n, int64_t channels, int64_t inner,
                               const float* scale, const float* bias, cudaStream_t stream) {
  if (!scale && !bias) return cudaSuccess;
  scale_bias_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, n, channels, inner, scale, bias);
  return cudaGetLastError();
}

cudaError_t scale_bias(float* acc, int64_t m, int64_t co, const float* scale, const float* bias,
                       cudaStream_t stream) {
  return scale_bias_strided(acc, m * co, co, 1, scale, bias, stream);
}

}  // namespace tp::compiled::cuda
