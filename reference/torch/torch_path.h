// The `torch` path: the same graph executed with LibTorch's own CPU ops, a second opinion that
// shares no op code with the reference. This header stays free of LibTorch includes, so only
// torch_path.cpp pays for them.
#pragma once

#include "harness/checkpoint.h"
#include "harness/graph.h"
#include "harness/safetensors.h"

namespace tp::torch_path {

// compute: f32 or f64.
Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights, const NamedTensors& inputs,
                                 DType compute);

void set_num_threads(int threads);

}  // namespace tp::torch_path
