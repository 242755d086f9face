#include "harness/runner/group_paths.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "harness/core/shapes.h"
#include "harness/runner/tolerance.h"

namespace tp {
namespace {

// The longest sum an op computes (harness/core/shapes.h): shapes as the graph infers them from
// its inputs (NCHW), or the reference's values where the graph's inputs were not captured (an
// op inside a fused group, such as the attention after to_q, has no captured value of its own).
int64_t reduction_of(const compiled::Plan& plan, const Op& op, const std::map<int, Tensor>& values,
                     const std::vector<Shape>& shapes) {
  const auto param = plan.params.find(op.weight);
  return longest_sum(op, param == plan.params.end() ? nullptr : &param->second->shape,
                     [&](int v) -> const Shape* {
                       if (std::size_t(v) < shapes.size() && !shapes[std::size_t(v)].empty())
                         return &shapes[std::size_t(v)];
                       auto it = values.find(v);
                       return it == values.end() ? nullptr : &it->second.shape();
                     });
}

// The largest GroupNorm conditioning group `grp` of `plan` met in any captured call of its graph
// (every tile of a tiled run: a sliver tile's near-constant input is the worst), or 1.
double worst_conditioning(const compiled::Plan& plan, const compiled::Group& grp,
                          const ReferenceRun& ref, const CompiledRun& run) {
  std::set<std::string> calls;
  for (const GroupCapture& g : run.groups)
    if (g.plan->graph_hash == plan.graph_hash) calls.insert(g.key());
  double worst = 1;
  for (const std::string& key : calls) {
    auto values = ref.values.find(key);
    if (values == ref.values.end()) continue;
    for (int o : grp.ops) {
      const Op& op = plan.graph->ops[std::size_t(o)];
      if (op.kind != OpKind::kGroupNorm) continue;
      if (auto x = values->second.find(op.inputs[0]); x != values->second.end())
        worst = std::max(worst, group_norm_conditioning(x->second, op.attrs.groups, op.attrs.eps));
    }
  }
  return worst;
}

}  // namespace

// The tolerance class of `grp` (an N-d group as its heaviest op).
OpClass class_of(const compiled::Plan& plan, const compiled::Group& grp) {
  switch (grp.kind) {
    case compiled::GroupKind::kConv:
      return OpClass::kConv;
    case compiled::GroupKind::kGroupNorm:
      return OpClass::kGroupNorm;
    case compiled::GroupKind::kAttention:
      return OpClass::kAttention;
    case compiled::GroupKind::kElementwise:
      return OpClass::kElementwise;
    case compiled::GroupKind::kUpsample:
      return OpClass::kUpsample;
    case compiled::GroupKind::kTensor: {  // N-d ops: judged as the heaviest op in the group
      OpClass c = OpClass::kElementwise;
      for (int o : grp.ops) switch (plan.graph->ops[std::size_t(o)].kind) {
          case OpKind::kMultiHeadAttention:
            return OpClass::kAttention;
          case OpKind::kConv:
          case OpKind::kLinearLast:
            c = OpClass::kConv;
            break;
          case OpKind::kLayerNorm:
          case OpKind::kRmsNorm:
            if (c == OpClass::kElementwise) c = OpClass::kGroupNorm;
            break;
          default:
            break;
        }
      return c;
    }
  }
  return OpClass::kElementwise;
}

// Every value's shape in a call of `plan`'s graph whose captured values are `values` (empty
// when its inputs were not captured).
std::vector<Shape> call_shapes(const compiled::Plan& plan, const std::map<int, Tensor>& values) {
  std::map<std::string, Shape> inputs;
  for (const auto& [name, v] : plan.graph->inputs)
    if (auto it = values.find(v); it != values.end()) inputs[name] = it->second.shape();
  if (inputs.size() != plan.graph->inputs.size()) return {};
  auto inferred = infer_value_shapes(*plan.graph, inputs);
  return inferred.ok() ? std::move(inferred).value() : std::vector<Shape>{};
}

ValuePath group_path(const compiled::Plan& plan, const compiled::Group& grp,
                     const std::map<int, Tensor>& values, const std::vector<Shape>& shapes,
                     DType reference, int train_timesteps) {
  ValuePath path;
  path.reference = reference;
  for (int o : grp.ops)
    path.reduction = std::max(path.reduction,
                              reduction_of(plan, plan.graph->ops[std::size_t(o)], values, shapes));
  for (int v : grp.inputs) path.dtypes.push_back(plan.buffers.at(v).dtype);
  for (int v : grp.outputs) path.dtypes.push_back(plan.buffers.at(v).dtype);
  // Parameters as stored: conv/linear matrices in the weight dtype, GroupNorm's affine and biases
  // in it too unless it is fp8 (then f32).
  for (int o : grp.ops) {
    const Op& op = plan.graph->ops[std::size_t(o)];
    if (op.weight.empty()) continue;
    const LayerPolicy layer = plan.policy.for_op(*plan.graph, op, grp.policy);
    path.dtypes.push_back(compiled::param_storage(layer, is_matrix_op(op.kind)));
    if (!op.bias.empty()) path.dtypes.push_back(compiled::param_storage(layer, false));
  }
  path.accumulation = grp.policy.accumulation;
  for (int o : grp.ops) {
    const Op& op = plan.graph->ops[std::size_t(o)];
    if (op.kind != OpKind::kGroupNorm) continue;
    if (auto x = values.find(op.inputs[0]); x != values.end())
      path.conditioning = std::max(
          path.conditioning, group_norm_conditioning(x->second, op.attrs.groups, op.attrs.eps));
  }
  for (int o : grp.ops) {
    const Op& op = plan.graph->ops[std::size_t(o)];
    if (op.kind != OpKind::kRelu) continue;
    if (auto x = values.find(op.inputs[0]); x != values.end())
      path.relu_conditioning = std::max(path.relu_conditioning, relu_conditioning(x->second));
  }
  for (int o : grp.ops) {
    const Op& op = plan.graph->ops[std::size_t(o)];
    if (op.kind != OpKind::kTimestepEmbedding) continue;
    auto t = values.find(op.inputs[0]);
    // Without the timesteps' values, the scheduler's largest.
    double largest = t == values.end() ? double(train_timesteps) : 0;
    if (t != values.end()) {
      const Tensor f = t->second.to(DType::kF32);
      for (int64_t i = 0; i < f.numel(); ++i)
        largest = std::max(largest, double(std::fabs(f.data<float>()[i])));
    }
    path.sinusoid_argument = std::max(path.sinusoid_argument, std::max(largest, 1.0));
  }
  return path;
}

// The paths of the graphs `keep` keeps, in one list.
std::vector<ValuePath> paths_of(const std::vector<GraphPaths>& graphs,
                                const std::function<bool(const std::string&)>& keep) {
  std::vector<ValuePath> out;
  for (const GraphPaths& g : graphs)
    if (keep(g.graph)) out.insert(out.end(), g.paths.begin(), g.paths.end());
  return out;
}

// Every group of the largest plan per graph (tiles share a graph; a base and a refiner UNet do
// not), each with the worst conditioning any call of it met; graphs in the order they were first
// compiled.
std::vector<GraphPaths> output_paths(const PreparedCase& p, const ReferenceRun& ref,
                                     const CompiledRun& run) {
  std::vector<const compiled::Plan*> largest;
  for (const compiled::Plan* plan : run.session->plans()) {
    auto same = std::find_if(largest.begin(), largest.end(), [&](const compiled::Plan* l) {
      return l->graph_hash == plan->graph_hash;
    });
    if (same == largest.end())
      largest.push_back(plan);
    else if (plan->groups.size() > (*same)->groups.size())
      *same = plan;
  }
  std::vector<GraphPaths> all;
  const std::map<int, Tensor> no_values;
  for (const compiled::Plan* plan : largest) {
    const std::string& graph = plan->graph->name;
    const std::map<int, Tensor>* values = &no_values;  // a call of this plan's: its shapes
    for (const GroupCapture& g : run.groups)
      if (g.plan == plan && values == &no_values)
        if (auto v = ref.values.find(g.key()); v != ref.values.end()) values = &v->second;
    const bool damped = p.model_of(graph).family().damps_errors(graph);
    const std::vector<Shape> shapes = call_shapes(*plan, *values);
    GraphPaths& out = all.emplace_back(GraphPaths{graph, {}});
    for (const compiled::Group& grp : plan->groups) {
      ValuePath& path = out.paths.emplace_back(
          group_path(*plan, grp, *values, shapes, p.reference, p.descriptor().train_timesteps));
      path.damped = damped;
      path.conditioning = std::max(path.conditioning, worst_conditioning(*plan, grp, ref, run));
    }
  }
  return all;
}

}  // namespace tp
