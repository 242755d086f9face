// A conv's or linear's conditioning on its input: how much more than its output's size the
// roundings of its input, weight and bias move it, where its sums cancel; and a fused group's
// with its LayerNorms'.
#pragma once

#include <map>
#include <vector>

#include "harness/core/checkpoint.h"
#include "harness/core/graph.h"

namespace tp {

// sqrt(sum_i (sum_j (W_ij x_j)^2 + b_i^2)) / ||W x + b|| for op `op` of `g` (a kConv or
// kLinearLast) on input `x`, computed on the reference in f64 as the op itself on x^2, W^2 and
// b^2. Independent roundings of x, W and b of relative size u move output i by about u/sqrt(3)
// times sqrt(sum_j (W_ij x_j)^2 + b_i^2); the local rule (3 u + sum) takes that for ||y||, true
// of sums whose terms have random signs (the factor is then near 1). Where the sums cancel, it
// is larger by this factor. 1 when the output is zero.
Expected<double> matrix_conditioning(const Graph& g, int op, const Weights& weights,
                                     const Tensor& x);

// A fused group's conditioning on the reference's values: its conv and linear ops' largest
// matrix_conditioning, and its LayerNorms' largest layer_norm_conditioning (tolerance.h), each op
// on its input as the reference computes it: a value of `values` (the group's captured inputs),
// or else the group's ops before it run on the reference (in f64) from them (a feed-forward's
// projection after its norm). 1 where none can be measured.
struct GroupConditioning {
  double matrix = 1;
  double layer_norm = 1;
};
GroupConditioning group_conditioning(const Graph& g, const std::vector<int>& ops,
                                     const Weights& weights, const std::map<int, Tensor>& values);

}  // namespace tp
