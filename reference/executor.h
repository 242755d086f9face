// Runs a graph on the CPU reference path in fp32 or fp64.
#pragma once

#include <functional>

#include "harness/core/checkpoint.h"
#include "harness/core/graph.h"
#include "harness/core/safetensors.h"

namespace tp::ref {

// Sees every value as it is produced (op output, in T). Capture must not change what runs:
// the executor hands out const references and continues unchanged.
using ValueObserver = std::function<void(const Op& op, const Tensor& value)>;

// `inputs` are matched to the graph's inputs by name and converted to `compute` (f32 or f64).
// Returns the graph's outputs by name, in `compute`.
Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights,
                                 const NamedTensors& inputs, DType compute,
                                 const ValueObserver& observe = {});

// Checks, before anything runs, that every op's input is large enough for it (convs need
// H + pads >= kernel) and returns the first op that is not, as an error naming it.
Status check_input_fits(const Graph& graph, const Shape& input_shape);

}  // namespace tp::ref
