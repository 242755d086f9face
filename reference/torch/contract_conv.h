// The contract check's convolutions (contract_check.cpp, `products`): a conv's fp64 value and
// its bound's fp32 sums of nonnegative terms, from one set of patch columns per block of output
// positions, through LibTorch's GEMMs. LibTorch's own fp64 conv (the whole output's columns,
// then one GEMM) ran at 4-15 GFLOP/s on ci's shapes, and its fp32 conv for the sums needed |x|
// and |w| rounded first: together about 40 s of a ci run's 60 s of contract checks.
// Includes LibTorch: only the torch path's files include it.
#pragma once

#include "reference/torch/torch_ops.h"

namespace tp::torch_path {

struct ConvSums {
  torch::Tensor y;        // the conv of x (padded as the op says), plus its bias, in fp64
  torch::Tensor terms;    // at least sum |x| |w| + |b| for each output, in fp64
  torch::Tensor carried;  // at least sum e |w|, where e is defined; else undefined
};

// `x`, `e`, `w` and `b` in fp64 (`e` nonnegative or undefined, `b` possibly undefined). The sums
// are computed in fp32 from |x|, e and |w| rounded to nearest, then multiplied by `raise`
// (which must cover those roundings and fp32's summation in any order); where fp32 overflows,
// in fp64, raised the same.
ConvSums conv_sums(const OpAttrs& a, const torch::Tensor& x, const torch::Tensor& e,
                   const torch::Tensor& w, const torch::Tensor& b, double raise);

}  // namespace tp::torch_path
