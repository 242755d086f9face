// The attention group's softmax, run on one block of query rows at a time between the two
// cuBLAS products (scores = Q K^T, out = P V), so only rows x N scores ever exist.
#include <cfloat>

#include "compiled/kernels/cuda/device_io.cuh"

namespace tp::compiled::cuda {
namespace {

template <typename Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[kThreads];
  __syncthreads();  // the previous reduction's readers are done with `partial`
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int step = kThreads / 2; step > 0; step /= 2) {
    if (int(threadIdx.x) < step)
      partial[threadIdx.x] = op(partial[threadIdx.x], partial[threadIdx.x + step]);
    __syncthreads();
  }
  return partial[0];
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

__global__ void softmax_kernel(float* scores, int64_t n, float scale, bool no_max,
                               Storage activation, int64_t first_row, int64_t frame_tokens) {
  float* row = scores + int64_t(blockIdx.x) * n;
  // Frame-causal: the row's query sees the keys of its own and earlier frames only.
  const int64_t seen =
      frame_tokens > 0
          ? min(n, ((first_row + int64_t(blockIdx.x)) / frame_tokens + 1) * frame_tokens)
          : n;
  float m = 0.0f;
  if (!no_max) {
    float local = -INFINITY;
    for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) local = fmaxf(local, row[j] * scale);
    m = block_reduce(local, Max{});
  }
  float local_sum = 0.0f;
  for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) {
    float e = expf(row[j] * scale - m);
    if (no_max)
      e = round_to(activation, e);  // a naive kernel feeds exp(s) to a low-precision P*V GEMM
    row[j] = e;
    local_sum += e;
  }
  const float inv = 1.0f / block_reduce(local_sum, Sum{});
  for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) row[j] *= inv;
  for (int64_t j = seen + threadIdx.x; j < n; j += blockDim.x) row[j] = 0.0f;
}

}  // namespace

cudaError_t softmax_rows(float* scores, int64_t rows, int64_t n, float scale, bool no_max,
                         Storage activation, cudaStream_t stream, int64_t first_row,
                         int64_t frame_tokens) {
  softmax_kernel<<<unsigned(rows), kThreads, 0, stream>>>(scores, n, scale, no_max, activation,
                                                          first_row, frame_tokens);
  return cudaGetLastError();
}

}  // namespace tp::compiled::cuda
