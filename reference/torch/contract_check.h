// The torch path's contract mode: an implementation of the compiled path's numerics contract
// (harness/core/contract.h) of its own. A group runs on LibTorch's ops in fp64 beside a running
// bound of how far a correct fp32 implementation may be from that value (each op's rounding
// error bound from its accumulation length and the sums of |terms|, documented in
// docs/tolerances.md), weights are quantized with LibTorch's conversions (fp8, which LibTorch
// 1.13 lacks, by frexp and round-half-even on the scaled values), and each output is rounded
// to its storage dtype with LibTorch's conversions at both ends of that bound. Free of LibTorch
// includes.
#pragma once

#include "harness/core/contract.h"

namespace tp::torch_path {

// The admitted intervals of group `c`'s outputs (a ContractChecker).
Expected<std::vector<ContractInterval>> contract_intervals(const Graph& graph,
                                                           const GroupContract& c,
                                                           const Weights& weights,
                                                           const std::map<int, Tensor>& inputs);

// A parameter as the contract check stores it, decoded to f64 (fp8 by its own arithmetic route,
// not the table of harness/core/dtype.h, which the tests hold it to).
Tensor contract_weights(const Tensor& w, const ContractParam& p);

}  // namespace tp::torch_path
