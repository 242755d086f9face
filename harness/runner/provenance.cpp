// NaN provenance: the first group, in execution order, that stored a non-finite value while
// every value it read was finite is the origin. It is replayed op by op on the emulated kernels
// (same inputs, same dtypes) to find the op and element; the cause is classified from the op,
// its input values there, and a replay without the injected faults.
#include <cmath>
#include <cstdio>
#include <limits>

#include "harness/core/format.h"
#include "harness/runner/runs.h"
#include "reference/executor.h"

namespace tp {
namespace {

// The first element that is non-finite or whose magnitude is past `range`, else -1.
int64_t first_out_of_range(const Tensor& t, double range) {
  const Tensor f = t.to(DType::kF64);
  const double* d = f.data<double>();
  for (int64_t i = 0; i < f.numel(); ++i)
    if (!std::isfinite(d[i]) || std::fabs(d[i]) > range) return i;
  return -1;
}

int64_t first_non_finite(const Tensor& t) {
  return first_out_of_range(t, std::numeric_limits<double>::infinity());
}

// A non-finite compiled value where the reference is finite.
bool new_non_finite(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::kF64), w = want.to(DType::kF64);
  for (int64_t i = 0; i < g.numel(); ++i)
    if (!std::isfinite(g.data<double>()[i]) && std::isfinite(w.data<double>()[i])) return true;
  return false;
}

double at(const Tensor& t, int64_t i) { return t.to(DType::kF64).data<double>()[i]; }

double max_abs(const Tensor& t) {
  const Tensor f = t.to(DType::kF64);
  double m = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    if (std::isfinite(f.data<double>()[i])) m = std::max(m, std::fabs(f.data<double>()[i]));
  return m;
}

std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

bool replay_finite(const compiled::GroupReplay& r) {
  for (const auto& [o, t] : r.ops)
    if (first_non_finite(t) >= 0) return false;
  for (const Tensor& t : r.stored)
    if (first_non_finite(t) >= 0) return false;
  return true;
}

// The cause of a non-finite fp32 op output `value` from finite inputs (the op's input values at
// the element are in `inputs` when the op is pointwise).
std::string classify(const Op& op, double value,
                     const std::vector<std::pair<std::string, double>>& inputs) {
  if (std::isinf(value)) return "overflow";
  bool input_inf = false, opposite = false;
  for (const auto& [name, v] : inputs) input_inf = input_inf || std::isinf(v);
  if (inputs.size() == 2)
    opposite = std::isinf(inputs[0].second) && std::isinf(inputs[1].second) &&
               (inputs[0].second > 0) != (inputs[1].second > 0);
  const bool add = op.kind == OpKind::kBinary && op.attrs.binary == BinaryOp::kAdd;
  if (add && opposite) return "inf-inf";
  if (input_inf) return "0*inf";
  // A reduction (conv, linear, attention, GroupNorm statistics) whose partial sums overflowed
  // with both signs.
  return "inf-inf";
}

// A sentence when the op's stored weight or bias holds non-finite values (empty when finite): a
// checkpoint value past the storage dtype's range, or fp8 w / scale past it with sat=nonsat.
std::string non_finite_params(const compiled::Plan& plan, const Op& op, const LayerPolicy& policy) {
  for (const std::string* key : {&op.weight, &op.bias}) {
    auto it = key->empty() ? plan.params.end() : plan.params.find(*key);
    if (it == plan.params.end()) continue;
    const compiled::PreparedParam& p = *it->second;
    int64_t bad = 0;
    float first = 0;
    for (float v : compiled::ParamFloats(p))
      if (!std::isfinite(v) && bad++ == 0) first = v;
    if (!bad) continue;
    std::string why;
    if (dtype_is_fp8(p.storage) && policy.saturation == Saturation::kNonSaturating)
      why = std::string(": w / scale went past ") + format_number(dtype_max_finite(p.storage)) +
            " with sat=nonsat" +
            (policy.clip != 1 ? " (the scale maps the " + clip_text(policy.clip) +
                                    "-quantile of |w| to it, not the largest weight)"
                              : "") +
            "; sat=satfinite or a scale that covers every weight keeps them finite";
    else
      why = std::string(": the checkpoint holds values past ") + dtype_name(p.storage) +
            "'s range; keep the layer in fp32 (--keep-fp32 " + op.name + ")";
    char count[96];
    std::snprintf(count, sizeof count, "%lld of its %zu stored %s %s values are non-finite",
                  static_cast<long long>(bad), std::size_t(p.count()), dtype_name(p.storage),
                  key == &op.bias ? "bias" : "weight");
    return count + std::string(" (the first ") + format_number(double(first)) + ")" + why;
  }
  return "";
}

}  // namespace

Provenance analyze_group(const compiled::Plan& plan, int group, const Shape& input_shape,
                         const std::map<int, Tensor>& inputs, const Weights* reference_weights,
                         const std::map<int, Tensor>* reference_inputs) {
  Provenance pr;
  const compiled::Group& grp = plan.groups[std::size_t(group)];
  pr.checkpoint = grp.checkpoints[0];
  pr.graph = plan.graph->name;
  pr.group = group;
  auto replay = compiled::replay_group(plan, group, input_shape, inputs, plan.faults);
  if (!replay.ok()) {
    pr.detail = "replaying " + grp.checkpoints[0] + " failed: " + replay.error().message();
    return pr;
  }
  const Graph& graph = *plan.graph;
  // The origin: the first op, in execution order, whose fp32 value is non-finite or past the
  // range of the dtype the group stores in (a conv that overflowed before the residual add it
  // is fused with is the layer to fix). The op that stores the non-finite output, when later,
  // is named apart.
  const Op* store_op = nullptr;
  for (std::size_t i = 0; i < grp.outputs.size() && !store_op; ++i)
    if (first_non_finite(replay->stored[i]) >= 0)
      for (const auto& [o, t] : replay->ops)
        if (graph.ops[std::size_t(o)].output == grp.outputs[i])
          store_op = &graph.ops[std::size_t(o)];
  const DType stored_dtype = store_op && plan.buffers.count(store_op->output)
                                 ? plan.buffers.at(store_op->output).dtype
                                 : grp.policy.activation;
  const double range = stored_dtype == DType::kF32 ? std::numeric_limits<double>::infinity()
                                                   : dtype_max_finite(stored_dtype);
  const Op* op = nullptr;
  const Tensor* op_value = nullptr;
  int64_t flat = -1;
  for (const auto& [o, t] : replay->ops)
    if ((flat = first_out_of_range(t, range)) >= 0) {
      op = &graph.ops[std::size_t(o)];
      op_value = &t;
      break;
    }
  if (!op) {
    pr.detail =
        grp.checkpoints[0] +
        " stays finite when replayed alone on the emulated kernels: a kernel that depends on "
        "more than its inputs (a race, a stale or aliased buffer), or a backend that differs from "
        "the emulation";
    return pr;
  }
  const bool at_store = std::isfinite(at(*op_value, flat));  // finite in fp32, past the range
  pr.found = true;
  pr.layer = op->name;
  pr.op = op_label(*op);
  if (store_op && store_op != op) {
    pr.stored_layer = store_op->name;
    pr.stored_op = op_label(*store_op);
  }
  pr.index = unravel(flat, op_value->shape());
  pr.value = at(*op_value, flat);

  // The op's input values where they feed the element (pointwise ops), else their range.
  auto value_of = [&](int v) -> const Tensor* {
    if (auto it = replay->inputs.find(v); it != replay->inputs.end()) return &it->second;
    for (const auto& [o, t] : replay->ops)
      if (graph.ops[std::size_t(o)].output == v) return &t;
    return nullptr;
  };
  const bool pointwise = !is_matrix_op(op->kind) && op->kind != OpKind::kMultiHeadAttention &&
                         op->kind != OpKind::kGroupNorm && op->kind != OpKind::kInterpolateNearest;
  for (int v : op->inputs)
    if (const Tensor* t = value_of(v)) {
      if (pointwise && t->shape() == op_value->shape())
        pr.inputs.emplace_back(graph.value_names[std::size_t(v)], at(*t, flat));
      else
        pr.inputs.emplace_back("max|" + graph.value_names[std::size_t(v)] + "|", max_abs(*t));
    }
  if (!op->weight.empty())
    if (auto it = plan.params.find(op->weight); it != plan.params.end()) {
      double m = 0;
      for (float w : compiled::ParamFloats(*it->second)) m = std::max(m, double(std::fabs(w)));
      double s = 1;
      for (float x : it->second->scales) s = std::max(s, double(x));
      pr.inputs.emplace_back("max|" + op->weight + "|", m * s);
    }

  // What the reference holds there: the group's ops again, on the reference's inputs.
  std::string ref_text;
  if (reference_weights && reference_inputs) {
    NamedTensors ref_inputs;
    const Graph sub = subgraph(graph, grp.ops);
    for (const auto& [name, v] : sub.inputs) ref_inputs.emplace_back(name, reference_inputs->at(v));
    auto ref_ops = ref::run_graph(sub, *reference_weights, ref_inputs, DType::kF64);
    if (ref_ops.ok())
      if (const Tensor* r = find_tensor(*ref_ops, op->name)) {
        pr.reference_value = at(*r, flat);
        pr.reference_max_abs = max_abs(*r);
        ref_text = "; the reference holds " + format_number(pr.reference_value) +
                   " there (max |ref| " + format_number(pr.reference_max_abs);
      }
  }

  if (!plan.faults.empty()) {
    auto clean = compiled::replay_group(plan, group, input_shape, inputs, compiled::FaultSet{});
    if (clean.ok() && replay_finite(*clean)) {
      pr.cause = "fault";
      pr.detail = pr.layer + " (" + pr.op + ") makes " + format_number(pr.value) + " at " +
                  format_index(pr.index) + " only with the injected fault(s) " +
                  plan.faults.to_string() +
                  ": replayed without them on the same inputs, the group stays finite" +
                  (ref_text.empty() ? "" : ref_text + ")");
      return pr;
    }
  }
  if (at_store) {
    pr.cause = "overflow";
    pr.dtype_max = dtype_max_finite(stored_dtype);
    if (!ref_text.empty())
      ref_text += ", " + format_number(pr.reference_max_abs / pr.dtype_max) + "x " +
                  dtype_name(stored_dtype) + "'s range)";
    const std::string stored =
        pr.stored_layer.empty()
            ? std::string(", so storing it gives ") + (pr.value > 0 ? "inf" : "-inf")
            : "; the group stores it at " + pr.stored_layer + " (" + pr.stored_op +
                  "), which gives a non-finite value";
    pr.detail = pr.layer + " (" + pr.op + ") computes " + format_number(pr.value) + " at " +
                format_index(pr.index) + " in fp32, past " + dtype_name(stored_dtype) +
                "'s largest finite value " + format_number(pr.dtype_max) + stored + ref_text;
    return pr;
  }
  if (const std::string params = non_finite_params(plan, *op, grp.policy); !params.empty()) {
    pr.cause = "non-finite-weight";
    pr.detail = pr.layer + " (" + pr.op + ") makes " + format_number(pr.value) + " at " +
                format_index(pr.index) + " from finite inputs: " + params +
                (ref_text.empty() ? "" : ref_text + ")");
    return pr;
  }
  pr.cause = classify(*op, pr.value, pr.inputs);
  if (pr.cause == "overflow") pr.dtype_max = dtype_max_finite(DType::kF32);
  pr.detail = pr.layer + " (" + pr.op + ") makes " + format_number(pr.value) + " at " +
              format_index(pr.index) + " from finite inputs in fp32 (" + pr.cause + ")" +
              (ref_text.empty() ? "" : ref_text + ")");
  return pr;
}

Provenance input_provenance(const Tensor& input) {
  Provenance pr;
  const int64_t i = first_non_finite(input);
  if (i < 0) return pr;
  pr.found = true;
  pr.layer = "input";
  pr.op = "input";
  pr.cause = "propagated-from-input";
  pr.index = unravel(i, input.shape());
  pr.value = at(input, i);
  pr.detail = "the pipeline input holds a non-finite value (" + format_number(pr.value) + " at " +
              format_index(pr.index) +
              "); both paths carry it into every later layer: fix the input";
  return pr;
}

Provenance locate_non_finite(const PreparedCase& p, const ReferenceRun& ref,
                             const CompiledRun& run) {
  Provenance pr = input_provenance(p.input);
  if (pr.found) return pr;
  for (const GroupCapture& g : run.groups) {
    const compiled::Plan& plan = *g.plan;
    const compiled::Group& grp = plan.groups[std::size_t(g.group)];
    const std::map<int, Tensor>& want = ref.values.at(g.key());
    bool bad = false;
    for (std::size_t i = 0; i < grp.outputs.size() && !bad; ++i)
      bad = new_non_finite(g.stored[i].second, want.at(grp.outputs[i]));
    if (!bad) continue;
    const std::map<int, Tensor> inputs = compiled_group_inputs(p, run, g);
    bool inputs_finite = true;
    for (const auto& [v, t] : inputs) inputs_finite = inputs_finite && first_non_finite(t) < 0;
    if (!inputs_finite) continue;  // carried in from an earlier group (one seen before this)
    Provenance found = analyze_group(plan, g.group, plan_input_shape(ref, g), inputs,
                                     &p.model_of(plan.graph->name, g.scope).weights, &want);
    if (!g.scope.empty()) {  // a call of a loop: which step, first
      found.step = g.scope.substr(0, g.scope.size() - 1);
      found.checkpoint = g.scope + found.checkpoint;
      found.detail = found.step + ": " + found.detail;
    }
    return found;
  }
  pr.detail = run.groups.empty() ? "tiled runs capture only the pipeline outputs; rerun the case "
                                   "with tiling off to locate the origin"
                                 : "no group made a non-finite value from finite inputs";
  return pr;
}

}  // namespace tp
