// LibTorch's own implementation of one graph op, shared by the torch path (torch_path.cpp) and
// its contract mode (contract_check.cpp). Includes LibTorch: only those two files include it.
#pragma once

#include <omp.h>
#include <torch/torch.h>

#include <vector>

#include "harness/core/graph.h"
#include "harness/core/tensor.h"

namespace tp::torch_path {

torch::Dtype torch_dtype(DType dt);
// `t` converted to `compute` (one rounding) and copied onto `device`.
torch::Tensor to_torch(const Tensor& t, DType compute, const torch::Device& device);
// `t` copied back to the host in `compute`.
Tensor from_torch(const torch::Tensor& t, DType compute);
// LibTorch's parallel ops set the calling thread's OpenMP team size to their own default (on a
// 2-vCPU machine, 1): held for the rest of the process, that would slow the other paths and
// change the bits of any product whose kernels depend on the team size. Each entry point keeps
// the caller's.
class KeepOpenMpThreads {
 public:
  KeepOpenMpThreads() : threads_(omp_get_max_threads()) {}
  ~KeepOpenMpThreads() { omp_set_num_threads(threads_); }
  KeepOpenMpThreads(const KeepOpenMpThreads&) = delete;
  KeepOpenMpThreads& operator=(const KeepOpenMpThreads&) = delete;

 private:
  int threads_;
};

// RoPE's float32 tables for `op` over the grid of `grid`'s trailing 3 axes, as [S, 1, pairs]
// (broadcast over the heads) on `device`: cos, then sin.
std::pair<torch::Tensor, torch::Tensor> rotary_tensors(const Op& op, const torch::Tensor& grid,
                                                       const torch::Device& device);
// x [B,S,heads*Dh] as adjacent pairs (x1, x2) combined to (x1 a + x2 b, x1 c + x2 d), each of a,
// b, c, d [S, 1, pairs]: RoPE's rotation is (cos, -sin, sin, cos).
torch::Tensor combine_pairs(const torch::Tensor& x, int heads, const torch::Tensor& a,
                            const torch::Tensor& b, const torch::Tensor& c, const torch::Tensor& d);

// A kConv's input padded as its attributes say (zeros or replicated edges), before the conv.
torch::Tensor conv_padded(const OpAttrs& a, const torch::Tensor& x);

// Op `op` on `in` with parameters `w` and `b` (undefined when the op has none).
torch::Tensor run_op(const Op& op, const std::vector<torch::Tensor>& in, const torch::Tensor& w,
                     const torch::Tensor& b);

}  // namespace tp::torch_path
