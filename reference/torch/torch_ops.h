// LibTorch's own implementation of one graph op, shared by the torch path (torch_path.cpp) and
// its contract mode (contract_check.cpp). Includes LibTorch: only those two files include it.
#pragma once

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
// Op `op` on `in` with parameters `w` and `b` (undefined when the op has none).
torch::Tensor run_op(const Op& op, const std::vector<torch::Tensor>& in, const torch::Tensor& w,
                     const torch::Tensor& b);

}  // namespace tp::torch_path
