#include "harness/runner/activation_triage.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "harness/core/compare.h"
#include "harness/core/format.h"
#include "harness/core/numbers.h"
#include "harness/core/safetensors.h"
#include "harness/core/untrusted_json.h"
#include "harness/models/family.h"
#include "harness/runner/activation_mapping.h"
#include "harness/runner/dump_triage.h"
#include "harness/runner/memory_budget.h"
#include "harness/runner/tolerance.h"
#include "reference/executor.h"

namespace tp {
namespace {

using namespace activations;

constexpr const char* kFormat = "twinpath-activations 1";

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

}  // namespace

namespace activations {

std::string DumpTriage::field(const char* k) const {
  auto it = file.metadata().find(k);
  return it == file.metadata().end() ? std::string() : it->second;
}

// The metadata: format, pipeline, dtype, the model's class.
Status DumpTriage::read_header() {
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
    return Error(dump_path + " was dumped from " + with_article(field("class_name")) +
                 ", but --model is " + with_article(model.family().class_name()) +
                 "; give the model folder the dump was made with");
  return Status();
}

// The dump's config against the model folder's.
Status DumpTriage::check_config() {
  // Every key the folder's config.json sets must hold the same value in the dump's (diffusers
  // adds its defaults; "_" keys are bookkeeping).
  std::ifstream in(model.dir + "/config.json");  // none for a built-in model
  if (const std::string dumped_config = field("config"); !dumped_config.empty() && in) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    TP_ASSIGN_OR_RETURN(const nlohmann::json mine,
                        parse_untrusted_json(text, model.dir + "/config.json"));
    TP_ASSIGN_OR_RETURN(const nlohmann::json theirs,
                        parse_untrusted_json(dumped_config, dump_path + ": its config metadata"));
    if (mine.is_object() && theirs.is_object())
      for (const auto& [k, v] : mine.items()) {
        if (k.empty() || k[0] == '_' || !theirs.contains(k) || theirs[k] == v) continue;
        if (v.is_number() && theirs[k].is_number() &&
            std::fabs(v.get<double>() - theirs[k].get<double>()) <=
                1e-9 * std::fabs(v.get<double>()))
          continue;
        return Error(dump_path + " was dumped from a model whose " + k + " is " +
                     json_excerpt(theirs[k]) + ", but --model's config.json says " +
                     json_excerpt(v) + "; give the model folder the dump was made with");
      }
  }

  return Status();
}

// The dump's weight fingerprint (metadata "weights": {name: [numel, a few values]}, the values at
// elements k * numel / n, n = min(8, numel), as the user's stack stored them) against --model's:
// a model other than the dump's would make every module look wrong. Values agree within what
// storing them in the dump's dtype (fp8 under layerwise casting) can change.
Status DumpTriage::check_weights() {
  const std::string text = field("weights");
  if (text.empty()) return Status();  // a dump made before the tool recorded it
  TP_ASSIGN_OR_RETURN(const nlohmann::json dumped,
                      parse_untrusted_json(text, dump_path + ": its weight fingerprint"));
  if (!dumped.is_object())
    return Error(dump_path + ": its weight fingerprint is not a JSON object; dump it again");
  int compared = 0, differ = 0;
  std::string first;
  for (const auto& [name, tensor] : model.weights) {
    const auto it = dumped.find(name);
    if (it == dumped.end() || !it->is_array() || it->size() < 2 || !(*it)[0].is_number()) continue;
    const Tensor values = tensor.to(DType::kF32);
    const int64_t numel = values.numel(), n = std::min<int64_t>(8, numel);
    if ((*it)[0].get<double>() != double(numel) || int64_t(it->size()) != n + 1) {
      differ += 1, compared += 1;
      if (first.empty()) first = name + " has " + json_excerpt((*it)[0]) + " elements in the dump";
      continue;
    }
    ++compared;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t at = k * numel / n;
      double mine = values.data<float>()[at];
      if (fp8) mine = std::clamp(mine, -448.0, 448.0);  // layerwise casting clips to e4m3's range
      const double theirs = (*it)[std::size_t(k + 1)].is_number()
                                ? (*it)[std::size_t(k + 1)].get<double>()
                                : std::nan("");
      if (std::fabs(mine - theirs) <= 0.0625 * std::fabs(mine) + 0.002) continue;
      if (first.empty())
        first = name + " element " + std::to_string(at) + " is " + format_number(theirs) +
                " in the dump, " + format_number(mine) + " in --model";
      ++differ;
      break;
    }
  }
  if (differ == 0) return Status();
  return Error(dump_path +
               " was dumped from other weights than --model's: " + std::to_string(differ) + " of " +
               std::to_string(compared) + " parameters differ (" + first +
               "), so every module would look wrong; give the model folder the dump was made "
               "with");
}

Status DumpTriage::read_pipeline_inputs() {
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
  // As the pipeline's graphs take them (a UNet's scalar timestep broadcast to the batch).
  TP_ASSIGN_OR_RETURN(pipeline_inputs,
                      model.family().bind_inputs(model, t.pipeline, pipeline_inputs));

  return Status();
}

Status DumpTriage::choose_graph(int64_t memory_budget) {
  // The graph the pipeline runs, and the reference on the dump's own inputs.
  const Family& family = model.family();
  // The primary input (what sizes the graph) by the family's own rule, not the file's order.
  TP_ASSIGN_OR_RETURN(const Tensor primary,
                      family.select_input(t.pipeline, pipeline_inputs, dump_path));
  TP_ASSIGN_OR_RETURN(std::vector<Stage> stages, family.stages(model, t.pipeline, primary.shape()));
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

Status DumpTriage::read_modules() {
  // The dump's module tensors, by module call.
  std::set<int> later_steps;
  for (const SafetensorsEntry& e : file.entries()) {
    std::string key = e.name;
    if (key.rfind("input/", 0) == 0) continue;
    // "stepK/...": a denoiser's later calls (the first one is compared).
    if (key.rfind("step", 0) == 0 && key.size() > 4 && std::isdigit((unsigned char)key[4]) &&
        key.find('/') == key.find_first_not_of("0123456789", 4)) {
      later_steps.insert(
          parse_number<int>(std::string_view(key).substr(4, key.find('/') - 4)).value_or(-1));
      continue;
    }
    int call = 0;
    if (key.rfind("call", 0) == 0 && key.find('/') != std::string::npos) {
      call = parse_number<int>(std::string_view(key).substr(4, key.find('/') - 4)).value_or(0);
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

void DumpTriage::place_modules() {
  // Place every dumped module on the graph.
  // Modules that compute nothing at inference (the dump's classes: path -> class name).
  // Advisory: classes that do not parse are none.
  const auto parsed = parse_untrusted_json(field("classes"), "classes");
  const nlohmann::json classes = parsed.ok() ? *parsed : nlohmann::json();
  auto identity = [&](const std::string& path) {
    if (!classes.is_object() || !classes.contains(path) || !classes[path].is_string()) return false;
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

Status DumpTriage::run_reference() {
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
  const auto start = std::chrono::steady_clock::now();
  auto ran = ref::run_graph(g, model.weights, graph_inputs, DType::kF32,
                            [&](const Op& op, const Tensor& x) {
                              shapes[std::size_t(op.output)] = x.shape();
                              reference_max[std::size_t(op.output)] = max_abs_finite(x);
                              if (wanted.count(op.output)) reference[op.output] = x;
                            });
  if (!ran.ok()) return ran.error().with_context("the reference on " + dump_path + "'s inputs");
  t.result.reference_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  return Status();
}

void DumpTriage::fit_modules() {
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
  for (const Placed& p : compared) {  // inputs: each external by the first dumped tensor that fits
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
    return a.ops.back() != b.ops.back() ? a.ops.back() < b.ops.back() : a.ops.size() < b.ops.size();
  });
}

// Graph ops no compared module covers.
void DumpTriage::list_missing() {
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

}  // namespace activations

Expected<ActivationTriage> triage_activations(const std::string& dump_path, const Model& model,
                                              int64_t memory_budget) {
  TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dump_path));
  DumpTriage d(dump_path, model, std::move(file));
  TP_RETURN_IF_ERROR(d.read_header());
  TP_RETURN_IF_ERROR(d.check_config());
  TP_RETURN_IF_ERROR(d.check_weights());
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
