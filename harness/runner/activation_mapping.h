// The pieces of `triage --activations` that place a user's dumped module activations on
// twinpath's graph and rerun its ops: layouts, module paths to ops, the weights as the user's
// stack stores them (harness/runner/activation_triage.cpp uses them).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/graph.h"
#include "harness/core/tensor.h"
#include "harness/models/family.h"
#include "harness/runner/tolerance.h"

namespace tp::activations {

// The dumped tensor in the layout of a graph value of `shape`: the same shape; the same dims but
// leading ones; the same elements in another grouping ([B, C, H*W] for [B, C, H, W]); or
// diffusers' token layout [B, H*W, C] for [B, C, H, W]. Nothing when none fits.
std::optional<Tensor> to_graph_layout(const Tensor& t, const Shape& shape);
bool all_finite(const Tensor& t);
int64_t first_non_finite(const Tensor& f);  // f32; -1 when all are finite
double max_abs_finite(const Tensor& f);     // f32
// Relative L2 of a - b (f32) over the elements finite in both (inf when none are).
double finite_distance(const Tensor& a, const Tensor& b);
// Whether op `name` lies under module `path` ("path.").
bool under(const std::string& name, const std::string& path);
OpClass op_class(OpKind k);
// The longest sum behind one output element of `op`.
int64_t reduction(const Op& op, const Weights& w, const std::vector<Shape>& shapes);
// Whether diffusers' layerwise casting stores parameter `key` of `g` in fp8.
bool layerwise_cast(const Graph& g, const std::string& key);
// The user's weights as their stack stores them (in f32).
Weights stored_weights(const Graph& g, const Weights& w, DType dtype, bool fp8);
// The ops of `g` a dumped module path (and its call within one model call) stands for.
std::vector<int> module_ops(const Graph& g, const std::string& path, int call);
// The values `ops` read from outside them, first read first.
std::vector<int> externals_of(const Graph& g, const std::vector<int>& ops);
// Runs `ops` of `g` alone in fp32 on `inputs` (value id -> tensor); every op's output by value.
Expected<std::map<int, Tensor>> run_ops(const Graph& g, const std::vector<int>& ops,
                                        const std::map<int, Tensor>& inputs, const Weights& w);

}  // namespace tp::activations
