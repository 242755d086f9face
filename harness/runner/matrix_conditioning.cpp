#include "harness/runner/matrix_conditioning.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "harness/runner/tolerance.h"
#include "reference/executor.h"

namespace tp {
namespace {

Tensor squared(const Tensor& t) {
  Tensor f = t.to(DType::kF64);
  for (int64_t i = 0; i < f.numel(); ++i) f.data<double>()[i] *= f.data<double>()[i];
  return f;
}

double sum_of(const Tensor& t, bool squares) {
  const Tensor f = t.to(DType::kF64);
  double s = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    s += squares ? f.data<double>()[i] * f.data<double>()[i] : f.data<double>()[i];
  return s;
}

}  // namespace

Expected<double> matrix_conditioning(const Graph& g, int op, const Weights& weights,
                                     const Tensor& x) {
  const Op& o = g.ops.at(std::size_t(op));
  if (!is_matrix_op(o.kind) || o.inputs.size() != 1)
    return Error("matrix_conditioning takes a conv or a linear of one input, not " + o.name);
  const Graph one = subgraph(g, {op});
  Weights squares;  // the op's parameters squared (the executor reads only the op's own)
  for (const std::string& key : {o.weight, o.bias}) {
    if (key.empty()) continue;
    auto w = weights.find(key);
    if (w == weights.end()) return Error("the model has no parameter " + key);
    squares.emplace(key, squared(w->second));
  }
  const std::string& input = one.inputs.front().first;
  TP_ASSIGN_OR_RETURN(NamedTensors y, ref::run_graph(one, weights, {{input, x}}, DType::kF64));
  TP_ASSIGN_OR_RETURN(NamedTensors terms,
                      ref::run_graph(one, squares, {{input, squared(x)}}, DType::kF64));
  const double size = sum_of(y.front().second, true);
  return size > 0 ? std::sqrt(sum_of(terms.front().second, false) / size) : 1.0;
}

namespace {

// Value `v` as the group's ops before `before` (an index into `ops`) compute it from `values`,
// on the reference in f64; nothing where an input of theirs is not in `values`.
std::optional<Tensor> computed_input(const Graph& g, const std::vector<int>& ops,
                                     std::size_t before, int v, const Weights& weights,
                                     const std::map<int, Tensor>& values) {
  const Graph prefix = subgraph(g, std::vector<int>(ops.begin(), ops.begin() + long(before)));
  NamedTensors inputs;
  for (const auto& [name, id] : prefix.inputs) {
    auto known = values.find(id);
    if (known == values.end()) return std::nullopt;
    inputs.emplace_back(name, known->second);
  }
  auto out = ref::run_graph(prefix, weights, inputs, DType::kF64);
  if (!out.ok()) return std::nullopt;
  for (const auto& [name, id] : prefix.outputs)
    if (id == v)
      if (const Tensor* t = find_tensor(*out, name)) return *t;
  return std::nullopt;
}

}  // namespace

GroupConditioning group_conditioning(const Graph& g, const std::vector<int>& ops,
                                     const Weights& weights, const std::map<int, Tensor>& values) {
  GroupConditioning worst;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = g.ops.at(std::size_t(ops[i]));
    const bool matrix = is_matrix_op(op.kind) && op.inputs.size() == 1;
    if (!matrix && op.kind != OpKind::kLayerNorm) continue;
    std::optional<Tensor> computed;
    const Tensor* x = nullptr;
    if (auto known = values.find(op.inputs[0]); known != values.end()) {
      x = &known->second;
    } else {
      computed = computed_input(g, ops, i, op.inputs[0], weights, values);
      if (computed) x = &*computed;
    }
    if (!x) continue;
    if (!matrix) {
      worst.layer_norm =
          std::max(worst.layer_norm, layer_norm_conditioning(*x, op.attrs.norm_dims, op.attrs.eps));
    } else if (auto k = matrix_conditioning(g, ops[i], weights, *x); k.ok()) {
      worst.matrix = std::max(worst.matrix, *k);
    }
  }
  return worst;
}

}  // namespace tp
