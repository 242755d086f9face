// The `torch` path: the same graph executed with LibTorch's own CPU ops, a second opinion that
// shares no op code with the reference. This header stays free of LibTorch includes, so only
// torch_path.cpp pays for them.
#pragma once

#include <memory>

#include "harness/core/checkpoint.h"
#include "harness/core/graph.h"
#include "harness/core/safetensors.h"

namespace tp::torch_path {

// compute: f32 or f64.
Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights,
                                 const NamedTensors& inputs, DType compute);

// Weights converted once and kept (on the GPU with `cuda`) for repeated runs: the peer the
// CUDA benchmarks time. compute: f32 or f64 on the CPU; f32, f16 or bf16 on CUDA.
class Runner {
 public:
  static Expected<std::unique_ptr<Runner>> create(const Weights& weights, DType compute, bool cuda);
  virtual ~Runner() = default;
  // Outputs come back to the host in `compute`'s dtype, after the device has finished.
  virtual Expected<NamedTensors> run(const Graph& graph, const NamedTensors& inputs) = 0;
};

// Whether this LibTorch was built with CUDA and sees a device.
bool cuda_available();

void set_num_threads(int threads);

}  // namespace tp::torch_path
