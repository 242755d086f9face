// Device-side reads and writes of activation storage (f32, f16, bf16) and the launch shape
// every elementwise kernel uses.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "compiled/kernels/cuda/kernels.h"

namespace tp::compiled::cuda {

__device__ __forceinline__ float load(Src x, int64_t i) {
  switch (x.storage) {
    case Storage::kF16:
      return __half2float(static_cast<const __half*>(x.data)[i]);
    case Storage::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(x.data)[i]);
    default:
      return static_cast<const float*>(x.data)[i];
  }
}

__device__ __forceinline__ void store(void* dst, Storage s, int64_t i, float v) {
  switch (s) {
    case Storage::kF16:
      static_cast<__half*>(dst)[i] = __float2half_rn(v);
      break;
    case Storage::kBF16:
      static_cast<__nv_bfloat16*>(dst)[i] = __float2bfloat16_rn(v);
      break;
    default:
      static_cast<float*>(dst)[i] = v;
      break;
  }
}

__device__ __forceinline__ float round_to(Storage s, float v) {
  switch (s) {
    case Storage::kF16:
      return __half2float(__float2half_rn(v));
    case Storage::kBF16:
      return __bfloat162float(__float2bfloat16_rn(v));
    default:
      return v;
  }
}

// SiLU in fp32, the emulation's order: x / (1 + exp(-x)).
__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements.
inline unsigned blocks_for(int64_t n) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)));
}

// The sum of one double per thread over the block (kThreads threads), in a fixed order, so a
// result does not depend on scheduling. Safe to call several times in one kernel.
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double partial[kThreads];
  __syncthreads();  // the previous call's readers are done with `partial`
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int step = kThreads / 2; step > 0; step /= 2) {
    if (int(threadIdx.x) < step) partial[threadIdx.x] += partial[threadIdx.x + step];
    __syncthreads();
  }
  return partial[0];
}

#define TP_GRID_STRIDE(i, n)                                                \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

}  // namespace tp::compiled::cuda
