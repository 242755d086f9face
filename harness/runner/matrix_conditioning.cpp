#include "harness/runner/matrix_conditioning.h"

#include <cmath>

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
  Weights own, squares;
  for (const std::string& key : {o.weight, o.bias}) {
    if (key.empty()) continue;
    auto w = weights.find(key);
    if (w == weights.end()) return Error("the model has no parameter " + key);
    own.emplace(key, w->second);
    squares.emplace(key, squared(w->second));
  }
  const std::string& input = one.inputs.front().first;
  TP_ASSIGN_OR_RETURN(NamedTensors y, ref::run_graph(one, own, {{input, x}}, DType::kF64));
  TP_ASSIGN_OR_RETURN(NamedTensors terms,
                      ref::run_graph(one, squares, {{input, squared(x)}}, DType::kF64));
  const double size = sum_of(y.front().second, true);
  return size > 0 ? std::sqrt(sum_of(terms.front().second, false) / size) : 1.0;
}

}  // namespace tp
