// An executor that runs no op: each graph call is answered with zeros of the output shapes that
// shape inference gives, after `on_call` has seen the call. The memory estimate records the calls
// a pipeline makes with it; planning ahead compiles each call's plan (runs.cpp).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "harness/core/executor.h"

namespace tp {

class ShapeExecutor final : public GraphExecutor {
 public:
  // The call's graph, weights and input shapes by name (every input the graph takes).
  using OnCall = std::function<Status(const Graph& graph, const Weights& weights,
                                      const std::map<std::string, Shape>& inputs)>;
  explicit ShapeExecutor(OnCall on_call) : on_call_(std::move(on_call)) {}
  Expected<NamedTensors> run(const Graph& graph, const Weights& weights,
                             const NamedTensors& inputs) override;

 private:
  OnCall on_call_;
};

}  // namespace tp
