// A plan's numerics contract, group by group, from its partition, buffers and policies
// (harness/core/contract.h): what both backends promise and the torch path's contract mode
// checks.
#include "harness/core/contract.h"

#include "compiled/plan.h"
#include "compiled/prepared_weights.h"

namespace tp::compiled {

GroupContract group_contract(const Plan& plan, int index) {
  const Group& grp = plan.groups[std::size_t(index)];
  const Graph& g = *plan.graph;
  GroupContract c;
  c.group = index;
  c.ops = grp.ops;
  for (int o : grp.ops) {
    const Op& op = g.ops[std::size_t(o)];
    c.label += (c.label.empty() ? "" : "+") + op_label(op);
    const bool matrix = is_matrix_op(op.kind);
    const LayerPolicy layer = plan.policy.for_op(g, op, grp.policy);
    for (const std::string* key : {&op.weight, &op.bias}) {
      if (key->empty()) continue;
      const bool m = matrix && key == &op.weight;
      const DType dt = param_storage(layer, m);
      c.params.push_back(ContractParam{*key, m, key == &op.bias, dt, layer.scale, layer.saturation,
                                       layer.clip, dtype_is_fp8(dt) && layer.layerwise,
                                       dt == DType::kF32 && kept_in_fp32(g, *key).has_value()});
    }
  }
  for (int v : grp.inputs) c.inputs.push_back({v, plan.buffers.at(v).dtype});
  for (int v : grp.outputs) c.outputs.push_back({v, plan.buffers.at(v).dtype});
  c.accumulation = grp.policy.accumulation;
  c.attention_operands = grp.policy.attention_operands();
  return c;
}

std::vector<ContractRow> plan_contract_rows(const Plan& plan) {
  std::vector<ContractRow> rows;
  for (int i = 0; i < int(plan.groups.size()); ++i) {
    std::vector<ContractRow> r = contract_rows(*plan.graph, group_contract(plan, i));
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return rows;
}

}  // namespace tp::compiled
