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
// Changes a value as it is produced, before anything reads it (the runner's Monte Carlo rounding
// estimate, harness/runner/rounding_noise.h); the observer then sees the changed value.
using ValuePerturber = std::function<void(const Op& op, Tensor& value)>;

// `inputs` are matched to the graph's inputs by name and converted to `compute` (f32 or f64).
// Returns the graph's outputs by name, in `compute`.
Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights,
                                 const NamedTensors& inputs, DType compute,
                                 const ValueObserver& observe = {},
                                 const ValuePerturber& perturb = {});

// Checks every input against the graph before anything runs (core shape inference): an input
// too small for a kernel, or shapes the ops cannot take, is an error naming the op.
Status check_inputs_fit(const Graph& graph, const NamedTensors& inputs);

}  // namespace tp::ref
