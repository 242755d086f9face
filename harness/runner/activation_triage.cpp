#include "harness/runner/activation_triage.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "harness/core/compare.h"
#include "harness/core/format.h"
#include "harness/core/safetensors.h"
#include "harness/models/family.h"
#include "harness/runner/activation_mapping.h"
#include "harness/runner/memory_budget.h"
#include "harness/runner/tolerance.h"
#include "reference/executor.h"

namespace tp {
namespace {

using namespace activations;

constexpr const char* kFormat = "twinpath-activations 1";

// One dumped module call: "[stepK/][callN/]MODULE/(input|output)[.X]".
struct DumpedModule {
  std::string path;
  int call = 0;
  std::optional<Tensor> output;
  std::vector<std::pair<std::string, Tensor>> inputs;  // "0", "1", "temb", ... in file order
};

// A dumped module placed on the graph.
struct Placed {
  std::string key;  // path, or "callN/path"
  std::string path;
  std::vector<int> ops;        // graph op indices, in execution order
  int value = -1;              // the module's output value
  std::vector<int> externals;  // values its ops read from outside it, first read first
  const DumpedModule* dump = nullptr;
  Tensor output;  // the dumped output in the graph's layout
};

Expected<DType> dump_dtype(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  return Error("the dump's dtype '" + s + "' is not f32, f16 or bf16");
}

// Refuses, before any module's tensors are read, a dump whose triage would not fit the budget.
// A graph the estimate cannot size is left to the triage, which says what is wrong with it.
// Returns the estimate (0 when the graph cannot be sized).
Expected<int64_t> check_dump_memory(const std::string& dump_path, const Model& model,
                                    const Graph& g, const NamedTensors& inputs,
                                    int64_t dump_elements, int64_t dump_bytes,
                                    int64_t memory_budget) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, v] : g.inputs)
    if (const Tensor* x = find_tensor(inputs, name)) shapes[name] = x->shape();
  auto estimate = estimate_dump_memory(g, shapes, dump_elements, dump_bytes, model);
  const BudgetChoice budget = choose_memory_budget(0, memory_budget);
  if (!estimate.ok()) return 0;
  if (budget.bytes <= 0 || estimate->bytes <= budget.bytes) return estimate->bytes;
  return Error("triaging " + dump_path + " needs about " + estimate->text() +
               ", over the memory budget of " + format_bytes(budget.bytes) + " (" + budget.source +
               "): refused before reading its activations; dump a smaller resolution, or give "
               "it more with --mem SIZE");
}

// A dump's triage, step by step (triage_activations runs them in order): the dump's header
// and pipeline inputs, the graph, the modules placed on it, the reference, each module's errors,
// the keep list, the origin and the verdict.
struct DumpTriage {
  DumpTriage(std::string path, const Model& m, SafetensorsFile f)
      : dump_path(std::move(path)), model(m), file(std::move(f)) {}

  const std::string dump_path;
  const Model& model;
  SafetensorsFile file;
  ActivationTriage t;
  DType dtype = DType::kF32;
  bool fp8 = false;      // layerwise fp8 casting
  double dtype_max = 0;  // the dump dtype's largest finite value
  NamedTensors pipeline_inputs;
  int64_t dump_elements = 0, dump_bytes = 0;   // the module tensors' (not read yet)
  Graph g;                                     // the one graph the pipeline runs
  std::map<std::string, DumpedModule> dumped;  // by "callN/path" or "path"
  std::vector<Placed> placed, compared;
  std::vector<Shape> shapes;            // every value's, from the reference run
  std::vector<double> reference_max;    // every value's largest finite |x| in the reference
  std::map<int, Tensor> reference;      // values of dumped modules
  std::map<int, Tensor> dumped_values;  // in the graph's layout, by value id
  std::vector<std::pair<double, std::string>> ranked;  // local error over tolerance, by module
  const Placed* origin = nullptr;
  std::map<int, Tensor> origin_local;  // the origin's ops in fp32 on its dumped inputs

  std::string field(const char* k) const {
    auto it = file.metadata().find(k);
    return it == file.metadata().end() ? std::string() : it->second;
  }

  // The metadata: format, pipeline, dtype, the model's class.
  Status read_header() {
    if (field("format") != kFormat)
      return Error(dump_path + " is not an activation dump (its metadata has no format '" +
                   std::string(kFormat) +
                   "'); write one with tools/dump_activations.py (README: triage a user's stack)");
    t.pipeline = field("pipeline");
    t.layerwise_fp8 = field("layerwise_fp8");
    t.dtype = field("dtype");
    TP_ASSIGN_OR_RETURN(dtype, dump_dtype(t.dtype));
    fp8 = !t.layerwise_fp8.empty();
    dtype_max = dtype_max_finite(dtype);
    if (!field("class_name").empty() && field("class_name") != model.family().class_name())
      return Error(dump_path + " was dumped from a " + field("class_name") + ", but --model is a " +
                   model.family().class_name() + "; give the model folder the dump was made with");

    return Status();
  }

  // The dump's config against the model folder's.
  Status check_config() {
    // Every key the folder's config.json sets must
    // hold the same value in the dump's (diffusers adds its defaults; "_" keys are bookkeeping).
    if (const std::string dumped_config = field("config"); !dumped_config.empty()) {
      std::ifstream in(model.dir + "/config.json");
      const nlohmann::json mine = nlohmann::json::parse(in, nullptr, false),
                           theirs = nlohmann::json::parse(dumped_config, nullptr, false);
      if (mine.is_object() && theirs.is_object())
        for (const auto& [k, v] : mine.items()) {
          if (k.empty() || k[0] == '_' || !theirs.contains(k) || theirs[k] == v) continue;
          if (v.is_number() && theirs[k].is_number() &&
              std::fabs(v.get<double>() - theirs[k].get<double>()) <=
                  1e-9 * std::fabs(v.get<double>()))
            continue;
          return Error(dump_path + " was dumped from a model whose " + k + " is " +
                       theirs[k].dump() + ", but --model's config.json says " + v.dump() +
                       "; give the model folder the dump was made with");
        }
    }

    return Status();
  }

  Status read_pipeline_inputs() {
    // The pipeline's inputs first (small): they size the graph, and with it the memory estimate,
    // before any module's tensors are read.
    for (const SafetensorsEntry& e : file.entries()) {
      if (e.name.rfind("input/", 0) != 0) {
        dump_elements += shape_numel(e.shape);
        dump_bytes += int64_t(e.end - e.begin);
        continue;
      }
      TP_ASSIGN_OR_RETURN(Tensor x, file.read(e));
      pipeline_inputs.emplace_back(e.name.substr(6), x.to(DType::kF32));
    }
    if (pipeline_inputs.empty())
      return Error(dump_path +
                   " holds no pipeline inputs (input/NAME); dump it again with "
                   "tools/dump_activations.py, which stores them");

    return Status();
  }

  Status choose_graph(int64_t memory_budget) {
    // The graph the pipeline runs, and the reference on the dump's own inputs.
    const Family& family = model.family();
    // The primary input (what sizes the graph) by the family's own rule, not the file's order.
    TP_ASSIGN_OR_RETURN(const Tensor primary,
                        family.select_input(t.pipeline, pipeline_inputs, dump_path));
    TP_ASSIGN_OR_RETURN(std::vector<Stage> stages,
                        family.stages(model, t.pipeline, primary.shape()));
    if (stages.size() != 1) {
      std::string single;  // the family's pipelines of one graph call
      for (const PipelineDescriptor& d : family.pipelines())
        if (!d.handoff && !d.denoising) single += (single.empty() ? "" : ", ") + d.name;
      return Error("triage --activations compares one graph; " + t.pipeline + " runs " +
                   std::to_string(stages.size()) + " (dump one of " + single + ")");
    }
    g = stages[0].graph;
    TP_ASSIGN_OR_RETURN(t.estimated_bytes,
                        check_dump_memory(dump_path, model, g, pipeline_inputs, dump_elements,
                                          dump_bytes, memory_budget));

    return Status();
  }

  Status read_modules() {
    // The dump's module tensors, by module call.
    std::set<int> later_steps;
    for (const SafetensorsEntry& e : file.entries()) {
      std::string key = e.name;
      if (key.rfind("input/", 0) == 0) continue;
      // "stepK/...": a denoiser's later calls (the first one is compared).
      if (key.rfind("step", 0) == 0 && key.size() > 4 && std::isdigit((unsigned char)key[4]) &&
          key.find('/') == key.find_first_not_of("0123456789", 4)) {
        later_steps.insert(std::atoi(key.c_str() + 4));
        continue;
      }
      int call = 0;
      if (key.rfind("call", 0) == 0 && key.find('/') != std::string::npos) {
        call = std::atoi(key.c_str() + 4);
        key = key.substr(key.find('/') + 1);
      }
      const auto slash = key.rfind('/');
      if (slash == std::string::npos) continue;
      const std::string path = key.substr(0, slash), what = key.substr(slash + 1);
      DumpedModule& m = dumped[(call ? "call" + std::to_string(call) + "/" : "") + path];
      m.path = path;
      m.call = call;
      if (what == "output" || (what.rfind("output.", 0) == 0 && !m.output)) {
        TP_ASSIGN_OR_RETURN(Tensor x, file.read(e));
        m.output = std::move(x);
      } else if (what.rfind("input.", 0) == 0) {
        TP_ASSIGN_OR_RETURN(Tensor x, file.read(e));
        m.inputs.emplace_back(what.substr(6), std::move(x));
      }
    }
    if (!later_steps.empty())
      t.notes.push_back("the model's first call is compared; its " +
                        std::to_string(later_steps.size()) +
                        " later calls (stepK/) are not (their inputs depend on the scheduler)");
    return Status();
  }

  void place_modules() {
    // Place every dumped module on the graph.
    // Modules that compute nothing at inference (the dump's classes: path -> class name).
    const nlohmann::json classes = nlohmann::json::parse(field("classes"), nullptr, false);
    auto identity = [&](const std::string& path) {
      if (!classes.is_object() || !classes.contains(path) || !classes[path].is_string())
        return false;
      const std::string c = classes[path].get<std::string>();
      return c == "Dropout" || c == "Identity";
    };
    for (auto& [key, m] : dumped) {
      if (!m.output) continue;
      if (identity(m.path)) {
        t.identity.push_back(key);
        continue;
      }
      Placed p;
      p.key = key;
      p.path = m.path;
      p.dump = &m;
      p.ops = module_ops(g, m.path, m.call);
      if (p.ops.empty()) {
        t.unknown.push_back(key + " (no op of the graph has this path)");
        continue;
      }
      p.value = g.ops[std::size_t(p.ops.back())].output;
      p.externals = externals_of(g, p.ops);
      placed.push_back(std::move(p));
    }
  }

  Status run_reference() {
    shapes.assign(g.value_names.size(), Shape{});
    reference_max.assign(g.value_names.size(), 0);
    std::set<int> wanted;
    for (const Placed& p : placed) {
      for (std::size_t k = p.ops.size(); k > 0 && k + 3 > p.ops.size(); --k)
        wanted.insert(g.ops[std::size_t(p.ops[k - 1])].output);
      for (int v : p.externals) wanted.insert(v);
    }
    NamedTensors graph_inputs;
    for (const auto& [name, v] : g.inputs) {
      const Tensor* x = find_tensor(pipeline_inputs, name);
      if (!x)
        return Error(dump_path + " has no input/" + name + ", which " + g.name +
                     " reads; dump it again with the pipeline's inputs");
      graph_inputs.emplace_back(name, *x);
      shapes[std::size_t(v)] = x->shape();
      reference[v] = *x;
    }
    auto ran = ref::run_graph(g, model.weights, graph_inputs, DType::kF32,
                              [&](const Op& op, const Tensor& x) {
                                shapes[std::size_t(op.output)] = x.shape();
                                reference_max[std::size_t(op.output)] = max_abs_finite(x);
                                if (wanted.count(op.output)) reference[op.output] = x;
                              });
    if (!ran.ok()) return ran.error().with_context("the reference on " + dump_path + "'s inputs");

    return Status();
  }

  void fit_modules() {
    // Dumped values in the graph's layout, by value id: module outputs, then their inputs.
    for (const auto& [name, v] : g.inputs) dumped_values[v] = *find_tensor(pipeline_inputs, name);
    for (Placed& p : placed) {
      // A composite module's output is its last op's, unless the graph puts a later op under its
      // path (a transformer block's residual add named attn1.residual): of its last three ops, the
      // one whose reference value the dumped output is closest to.
      if (p.ops.size() > 1) {
        double best = INFINITY;
        std::size_t keep = p.ops.size();
        for (std::size_t k = p.ops.size(); k > 0 && k + 3 > p.ops.size(); --k) {
          const int v = g.ops[std::size_t(p.ops[k - 1])].output;
          auto want = reference.find(v);
          auto got = to_graph_layout(*p.dump->output, shapes[std::size_t(v)]);
          if (want == reference.end() || !got) continue;
          const double d = finite_distance(*got, want->second);
          if (d < best) {
            best = d;
            keep = k;
          }
        }
        p.ops.resize(keep);
        p.value = g.ops[std::size_t(p.ops.back())].output;
        p.externals = externals_of(g, p.ops);
      }
      auto out = to_graph_layout(*p.dump->output, shapes[std::size_t(p.value)]);
      if (!out) {
        t.unknown.push_back(p.key + " (output " + shape_string(p.dump->output->shape()) +
                            " does not fit the graph's " +
                            shape_string(shapes[std::size_t(p.value)]) + ")");
        continue;
      }
      p.output = *out;
      dumped_values.emplace(p.value, p.output);
      compared.push_back(std::move(p));
    }
    for (const Placed& p :
         compared) {  // inputs: each external by the first dumped tensor that fits
      std::vector<bool> used(p.dump->inputs.size(), false);
      for (int v : p.externals)
        for (std::size_t i = 0; i < p.dump->inputs.size(); ++i) {
          if (used[i]) continue;
          if (auto x = to_graph_layout(p.dump->inputs[i].second, shapes[std::size_t(v)])) {
            used[i] = true;
            dumped_values.emplace(v, *x);
            break;
          }
        }
    }
    std::sort(compared.begin(), compared.end(), [](const Placed& a, const Placed& b) {
      return a.ops.back() != b.ops.back() ? a.ops.back() < b.ops.back()
                                          : a.ops.size() < b.ops.size();
    });
  }

  // Graph ops no compared module covers.
  void list_missing() {
    t.compared = int(compared.size());
    {
      std::set<std::string> seen;
      for (const Placed& p : compared) seen.insert(p.path);
      for (const Op& op : g.ops)
        if (!seen.count(op.name)) {
          bool inside = false;  // under a dumped composite: its parts need not be dumped
          for (const std::string& s : seen) inside = inside || under(op.name, s);
          if (!inside) t.missing.push_back(op.name);
        }
    }
  }

  // The heaviest op class inside module `p`, and each op's value path (dtypes, reduction).
  OpClass module_paths(const Placed& p, std::vector<ValuePath>& paths) const {
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
  std::map<int, Tensor> module_inputs(const Placed& p, bool& finite, bool& dumped_all) const {
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

  Status compare_modules() {
    // Per module: accumulated and local error.
    const Weights local_weights = stored_weights(model.weights, dtype, fp8);
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

  void list_keep_fp32() {
    CaseResult& r = t.result;
    // Under layerwise fp8: weights past e4m3's range, which the cast clips to +-448.
    if (fp8)
      for (const auto& [key, w] : model.weights) {
        if (!layerwise_cast(model.weights, key)) continue;
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
  void describe_origin() {
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
  const Op* first_op_past_range(const Placed& p, double& value) const {
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
  const Op* first_dumped_non_finite(const Placed& p) const {
    for (int o : p.ops) {
      const Op& op = g.ops[std::size_t(o)];
      auto it = dumped_values.find(op.output);
      if (it != dumped_values.end() && !all_finite(it->second)) return &op;
    }
    return nullptr;
  }

  // The op, the cause and the detail of the origin `p`; the op goes first in the keep list.
  void name_origin_op(const Placed& p, Provenance& pv) {
    double over_value = 0;
    const Op* over = first_op_past_range(p, over_value);
    const Op* broken = first_dumped_non_finite(p);
    const Op& named = over ? *over : broken ? *broken : g.ops[std::size_t(p.ops.back())];
    pv.op = op_kind_name(named.kind);
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
      pv.detail =
          inner +
          "the first non-finite value the dump shows; in fp32 on the same dumped inputs "
          "the module stays finite and within " +
          t.dtype + "'s range (largest " +
          format_number(max_abs_finite(origin_local.count(p.value) ? origin_local.at(p.value)
                                                                   : reference.at(p.value))) +
          "): the user's module computes something else there (" +
          (named.kind == OpKind::kAttention || named.kind == OpKind::kMultiHeadAttention
               ? "its scores overflowed before the softmax: a scale or a low-precision "
                 "product?"
               : "a patched or fused kernel, a lower-precision intermediate?") +
          ")";
    }
    std::vector<std::string>& keep = t.result.keep_fp32;
    if (std::find(keep.begin(), keep.end(), named.name) == keep.end())
      keep.insert(keep.begin(), named.name);
  }

  void conclude() {
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
    r.repro = "twinpath triage --activations " + dump_path + " --model DIR";
  }
};

}  // namespace

Expected<ActivationTriage> triage_activations(const std::string& dump_path, const Model& model,
                                              int64_t memory_budget) {
  TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dump_path));
  DumpTriage d(dump_path, model, std::move(file));
  TP_RETURN_IF_ERROR(d.read_header());
  TP_RETURN_IF_ERROR(d.check_config());
  TP_RETURN_IF_ERROR(d.read_pipeline_inputs());
  TP_RETURN_IF_ERROR(d.choose_graph(memory_budget));
  TP_RETURN_IF_ERROR(d.read_modules());
  d.place_modules();
  TP_RETURN_IF_ERROR(d.run_reference());
  d.fit_modules();
  d.list_missing();
  TP_RETURN_IF_ERROR(d.compare_modules());
  d.list_keep_fp32();
  d.describe_origin();
  d.conclude();
  return std::move(d.t);
}

}  // namespace tp
