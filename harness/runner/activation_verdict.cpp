// triage --activations, the verdict: each placed module's accumulated and local error, the
// layers to keep in fp32, the origin of the first non-finite value and the outcome.
#include <algorithm>
#include <cmath>

#include "harness/core/compare.h"
#include "harness/core/format.h"
#include "harness/runner/activation_mapping.h"
#include "harness/runner/dump_triage.h"

namespace tp::activations {

// The heaviest op class inside module `p`, and each op's value path (dtypes, reduction).
OpClass DumpTriage::module_paths(const Placed& p, std::vector<ValuePath>& paths) const {
  OpClass heaviest = OpClass::kElementwise;
  for (int o : p.ops) {
    const Op& op = g.ops[std::size_t(o)];
    const OpClass c = op_class(op.kind);
    if (c == OpClass::kAttention || (c == OpClass::kConv && heaviest != OpClass::kAttention) ||
        (c == OpClass::kGroupNorm && heaviest == OpClass::kElementwise))
      heaviest = c;
    ValuePath vp;
    vp.dtypes = {dtype};
    if (fp8 && !op.weight.empty()) vp.dtypes.push_back(DType::kF8E4M3);
    vp.reduction = reduction(op, model.weights, shapes);
    paths.push_back(vp);
  }
  return heaviest;
}

// Module `p`'s inputs as dumped (the reference's where the dump lacks one).
std::map<int, Tensor> DumpTriage::module_inputs(const Placed& p, bool& finite,
                                                bool& dumped_all) const {
  std::map<int, Tensor> inputs;
  for (int v : p.externals) {
    auto it = dumped_values.find(v);
    if (it == dumped_values.end()) {
      dumped_all = false;
      inputs[v] = reference.at(v);
    } else {
      inputs[v] = it->second;
      finite = finite && all_finite(it->second);
    }
  }
  return inputs;
}

Status DumpTriage::compare_modules() {
  // Per module: accumulated and local error.
  const Weights local_weights = stored_weights(g, model.weights, dtype, fp8);
  CaseResult& r = t.result;
  r.id = "triage --activations " + dump_path;
  r.device = "user's stack (" + t.dtype + (fp8 ? ", layerwise fp8 " + t.layerwise_fp8 : "") + ")";
  for (const Placed& p : compared) {
    CheckpointRecord rec;
    rec.name = p.key;
    rec.graph = g.name;
    rec.dtype = t.dtype;
    std::vector<ValuePath> paths;
    const OpClass heaviest = module_paths(p, paths);
    rec.op_class = op_class_name(heaviest);
    TP_ASSIGN_OR_RETURN(rec.accumulated, compare_tensors(p.output, reference.at(p.value), dtype));
    bool inputs_finite = true, inputs_dumped = true;
    const std::map<int, Tensor> inputs = module_inputs(p, inputs_finite, inputs_dumped);
    const bool output_finite = all_finite(p.output);
    auto local = run_ops(g, p.ops, inputs, local_weights);
    if (local.ok() && inputs_dumped) {
      const Tolerance tol =
          p.ops.size() == 1 ? local_tolerance(heaviest, paths[0]) : output_tolerance(paths);
      TP_ASSIGN_OR_RETURN(rec.local, compare_tensors(p.output, local->at(p.value), dtype));
      rec.has_local = true;
      rec.tolerance_rel_l2 = tol.rel_l2;
      rec.tolerance_max_element = tol.max_element;
      rec.tolerance_basis = tol.basis;
      if (output_finite && inputs_finite && rec.local.rel_l2 > tol.rel_l2) {
        rec.passed = false;
        ranked.emplace_back(rec.local.rel_l2 / tol.rel_l2, p.key);
      }
    }
    if (!origin && !output_finite && inputs_finite) {
      origin = &p;
      if (local.ok()) origin_local = *local;
      rec.passed = false;
    }
    r.checkpoints.push_back(std::move(rec));
  }
  std::sort(ranked.rbegin(), ranked.rend());
  for (const auto& [x, name] : ranked)
    t.over_tolerance.push_back(name + " (" + format_number(x) + "x tol)");

  return Status();
}

void DumpTriage::list_keep_fp32() {
  CaseResult& r = t.result;
  // Under layerwise fp8: weights past e4m3's range, which the cast clips to +-448.
  if (fp8)
    for (const auto& [key, w] : model.weights) {
      if (!layerwise_cast(g, key)) continue;
      const double largest = max_abs_finite(w.to(DType::kF32));
      if (largest > dtype_max_finite(DType::kF8E4M3))
        t.clipped.push_back(key + " (max |w| " + format_number(largest) + ")");
    }

  // Layers whose reference values leave the dump's dtype: the ones to keep in fp32.
  for (const Op& op : g.ops)
    if (reference_max[std::size_t(op.output)] > dtype_max) r.keep_fp32.push_back(op.name);
  for (const std::string& c : t.clipped) {  // their modules: out of the layerwise casting
    const std::string module = c.substr(0, c.rfind('.', c.find(' ')));
    if (std::find(r.keep_fp32.begin(), r.keep_fp32.end(), module) == r.keep_fp32.end())
      r.keep_fp32.push_back(module);
  }
  r.searched = true;
  r.search_note = r.keep_fp32.empty()
                      ? "no layer's reference value leaves " + t.dtype + "'s range"
                      : "the layers whose fp32 reference values leave " + t.dtype + "'s range" +
                            std::string(t.clipped.empty() ? ""
                                                          : ", and those whose weights fp8 "
                                                            "layerwise casting clips");
}

// The origin: its first non-finite element, the op inside it, and why; without one, a
// non-finite pipeline input.
void DumpTriage::describe_origin() {
  Provenance& pv = t.result.provenance;
  if (!origin) {
    for (const auto& [name, x] : pipeline_inputs)
      if (!all_finite(x)) {
        pv.found = true;
        pv.cause = "propagated-from-input";
        pv.detail = "the pipeline input " + name + " already holds non-finite values";
        break;
      }
    return;
  }
  const Placed& p = *origin;
  const Tensor& got = p.output;
  const int64_t at = first_non_finite(got);
  pv.found = true;
  pv.checkpoint = p.key;
  pv.graph = g.name;
  pv.layer = p.path;
  pv.index = unflatten_index(at, got.shape());
  pv.value = got.data<float>()[at];
  pv.reference_value = reference.at(p.value).data<float>()[at];
  pv.reference_max_abs = reference_max[std::size_t(p.value)];
  for (int v : p.externals)
    if (auto it = dumped_values.find(v); it != dumped_values.end())
      pv.inputs.emplace_back(g.value_names[std::size_t(v)], max_abs_finite(it->second));
  name_origin_op(p, pv);
}

// The op inside the origin module: the first whose fp32 value on the dumped inputs leaves the
// dtype's range (its value in `value`); null when none does.
const Op* DumpTriage::first_op_past_range(const Placed& p, double& value) const {
  for (int o : p.ops) {
    const Op& op = g.ops[std::size_t(o)];
    auto it = origin_local.find(op.output);
    if (it == origin_local.end()) continue;
    const Tensor& x = it->second;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (!std::isfinite(x.data<float>()[i]) || std::fabs(x.data<float>()[i]) > dtype_max) {
        value = x.data<float>()[i];
        return &op;
      }
  }
  return nullptr;
}

// The first op inside `p` whose dumped value (a submodule's) is non-finite, or null.
const Op* DumpTriage::first_dumped_non_finite(const Placed& p) const {
  for (int o : p.ops) {
    const Op& op = g.ops[std::size_t(o)];
    auto it = dumped_values.find(op.output);
    if (it != dumped_values.end() && !all_finite(it->second)) return &op;
  }
  return nullptr;
}

// The op, the cause and the detail of the origin `p`; the op goes first in the keep list.
void DumpTriage::name_origin_op(const Placed& p, Provenance& pv) {
  double over_value = 0;
  const Op* over = first_op_past_range(p, over_value);
  const Op* broken = first_dumped_non_finite(p);
  const Op& named = over ? *over : broken ? *broken : g.ops[std::size_t(p.ops.back())];
  pv.op = op_label(named);
  const std::string inner = named.name == p.path ? "" : "its op " + named.name + ": ";
  const bool nan = std::isnan(pv.value);
  const bool product = named.kind == OpKind::kSilu || named.kind == OpKind::kGelu ||
                       (named.kind == OpKind::kBinary && named.attrs.binary == BinaryOp::kMul);
  pv.cause = !nan ? "overflow" : product ? "0*inf" : "inf-inf";
  if (over) {
    pv.dtype_max = dtype_max;
    pv.detail = inner + named.name + " reaches " + format_number(over_value) +
                " in fp32 on the module's " + "dumped inputs, past " + t.dtype + "'s " +
                format_number(dtype_max) +
                (nan ? "; the overflowed value then met another infinity (or a zero) in the "
                       "user's module, leaving NaN"
                     : "");
  } else {
    pv.detail = inner +
                "the first non-finite value the dump shows; in fp32 on the same dumped inputs "
                "the module stays finite and within " +
                t.dtype + "'s range (largest " +
                format_number(max_abs_finite(origin_local.count(p.value) ? origin_local.at(p.value)
                                                                         : reference.at(p.value))) +
                "): the user's module computes something else there (" +
                (named.kind == OpKind::kMultiHeadAttention
                     ? "its scores overflowed before the softmax: a scale or a low-precision "
                       "product?"
                     : "a patched or fused kernel, a lower-precision intermediate?") +
                ")";
  }
  std::vector<std::string>& keep = t.result.keep_fp32;
  if (std::find(keep.begin(), keep.end(), named.name) == keep.end())
    keep.insert(keep.begin(), named.name);
}

void DumpTriage::conclude() {
  CaseResult& r = t.result;
  const Provenance& pv = r.provenance;
  const bool finding = pv.found || !ranked.empty() || !t.clipped.empty();
  r.outcome = finding ? Outcome::kFailed : Outcome::kPassed;
  if (pv.found && !origin)
    r.reason = pv.detail;
  else if (origin)
    r.reason = "first non-finite output at " + pv.layer + " (" + pv.op + "), cause " + pv.cause;
  else if (!ranked.empty())
    r.reason = std::to_string(ranked.size()) +
               " modules' outputs are further from the reference on their own dumped inputs "
               "than the tolerance for " +
               t.dtype + " allows; worst " + t.over_tolerance[0];
  else if (!t.clipped.empty())
    r.reason =
        std::to_string(t.clipped.size()) +
        " weights exceed fp8 e4m3's 448, which layerwise casting clips them to: " + t.clipped[0];
  else
    r.reason = "every compared module is finite and within tolerance of the reference";
  r.repro = "twinpath triage --activations " + shell_quote(dump_path) + " --model " +
            shell_quote(model.dir);
}
}  // namespace tp::activations
