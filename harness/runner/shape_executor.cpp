#include "harness/runner/shape_executor.h"

#include "harness/core/shapes.h"

namespace tp {

Expected<NamedTensors> ShapeExecutor::run(const Graph& graph, const Weights& weights,
                                          const NamedTensors& inputs) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, id] : graph.inputs) {
    const Tensor* t = find_tensor(inputs, name);
    if (!t) return Error(graph.name + " takes an input named " + name + ", which was not given");
    shapes[name] = t->shape();
  }
  TP_RETURN_IF_ERROR(on_call_(graph, weights, shapes));
  TP_ASSIGN_OR_RETURN(std::vector<Shape> values, infer_value_shapes(graph, shapes));
  NamedTensors out;
  for (const auto& [name, id] : graph.outputs)
    out.emplace_back(name, Tensor(DType::kF32, values[std::size_t(id)]));
  return out;
}

}  // namespace tp
