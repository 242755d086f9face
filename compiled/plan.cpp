#include "compiled/plan.h"

#include "harness/core/shapes.h"

namespace tp::compiled {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kConv:
      return "conv";
    case GroupKind::kGroupNorm:
      return "group_norm";
    case GroupKind::kAttention:
      return "attention";
    case GroupKind::kElementwise:
      return "elementwise";
    case GroupKind::kUpsample:
      return "upsample";
    case GroupKind::kTensor:
      return "tensor";
  }
  return "?";
}

std::string Group::label() const {
  std::string s = upsample_prologue ? "upsample+" : "";
  return s + group_kind_name(kind) + "[" + std::to_string(ops.size()) + " ops]";
}

Expected<std::vector<Shape>> infer_shapes(const Graph& g, const Shape& input_shape,
                                          const std::vector<Shape>& other_inputs) {
  if (!g.has_nd_ops() && input_shape.size() != 4)
    return Error("the compiled path takes [batch, channels, height, width] inputs, got " +
                 shape_string(input_shape));
  if (other_inputs.size() + 1 != g.inputs.size())
    return Error(g.name + " takes " + std::to_string(g.inputs.size()) + " inputs, given " +
                 std::to_string(other_inputs.size() + 1));
  std::map<std::string, Shape> inputs{{g.inputs[0].first, input_shape}};
  for (std::size_t i = 0; i < other_inputs.size(); ++i)
    inputs[g.inputs[i + 1].first] = other_inputs[i];
  return infer_value_shapes(g, inputs);
}

Expected<std::vector<Shape>> plan_shapes(const Plan& plan, const Shape& input_shape) {
  ShapeMemo* memo = plan.shape_memo.get();
  auto same = [&](const ShapeMemo::Entry& e) {
    return e.graph == plan.graph && e.input == input_shape && e.other_inputs == plan.other_inputs;
  };
  if (memo) {
    std::lock_guard<std::mutex> lock(memo->mutex);
    for (const ShapeMemo::Entry& e : memo->entries)
      if (same(e)) return e.shapes;
  }
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes,
                      infer_shapes(*plan.graph, input_shape, plan.other_inputs));
  if (memo) {
    std::lock_guard<std::mutex> lock(memo->mutex);
    if (memo->entries.size() == ShapeMemo::kEntries) memo->entries.erase(memo->entries.begin());
    memo->entries.push_back({plan.graph, plan.other_inputs, input_shape, shapes});
  }
  return shapes;
}

}  // namespace tp::compiled
