#include "harness/runner/group_repro.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "compiled/backend.h"
#include "harness/core/format.h"
#include "harness/core/numbers.h"
#include "harness/core/untrusted_json.h"
#include "harness/models/model.h"

namespace tp {
namespace {

constexpr const char* kReproVersion = "1";

Expected<std::string> config_text(const Model& m) {
  const std::vector<std::string> names = builtin_config_names();
  if (std::find(names.begin(), names.end(), m.dir) != names.end())
    return builtin_config_text(m.dir);
  std::ifstream in(std::filesystem::path(m.dir) / "config.json");
  if (!in) return Error(m.dir + "/config.json: cannot read the model's config for the repro");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Expected<Shape> parse_shape_text(const std::string& t) {
  Shape s;
  for (const std::string& d : split_list(t, ',')) {
    const std::optional<int64_t> n = parse_number<int64_t>(d);
    if (!n || *n < 0) return Error("bad shape '" + excerpt(t) + "'");
    s.push_back(*n);
  }
  return s;
}

std::string meta(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

}  // namespace

Status write_group_repro(const std::string& path, const PreparedCase& p, const CompiledRun& run,
                         const Provenance& origin) {
  const GroupCapture* capture = nullptr;
  for (const GroupCapture& g : run.groups)
    if (g.plan->graph->name == origin.graph && g.group == origin.group &&
        g.scope == (origin.step.empty() ? "" : origin.step + "/"))
      capture = &g;
  if (!capture) return Error("the origin group is not among the captured groups; nothing to write");
  const compiled::Plan& plan = *capture->plan;
  const compiled::Group& grp = plan.groups[std::size_t(origin.group)];
  NamedTensors tensors;
  for (const auto& [v, t] : compiled_group_inputs(p, run, *capture))
    tensors.emplace_back("value/" + std::to_string(v), t);
  for (int o : grp.ops) {
    const Op& op = plan.graph->ops[std::size_t(o)];
    for (const std::string* key : {&op.weight, &op.bias})
      if (!key->empty())
        tensors.emplace_back("weight/" + *key,
                             p.model_of(plan.graph->name, capture->scope).weights.at(*key));
  }
  TP_ASSIGN_OR_RETURN(std::string config,
                      config_text(p.model_of(plan.graph->name, capture->scope)));
  const std::string keep = join_list(p.session.policy.keep_fp32, ',');
  const compiled::DTypePolicy& cast = p.session.policy;
  std::string other_shapes;
  for (const Shape& other : plan.other_inputs)
    other_shapes += (other_shapes.empty() ? "" : ";") + join_numbers(other, ',');
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"twinpath_repro", kReproVersion},
      {"case", p.c.id()},
      {"config", config},
      {"graph", plan.graph->name},
      {"group", std::to_string(origin.group)},
      {"checkpoint", grp.checkpoints[0]},
      {"input_shape",
       join_numbers(plan.capacity_shape, ',')},  // cases plan exact shapes: capacity = input
      {"other_input_shapes", other_shapes},      // a multi-input graph's others, ";"-separated
      {"policy", compiled::layer_policy_string(p.session.policy.base)},
      {"keep_fp32", keep},
      {"cast_skip", cast.cast_skip ? join_list(*cast.cast_skip, ',') : ""},  // "": diffusers'
      {"load", cast.load ? dtype_name(*cast.load) : ""},
      {"faults", plan.faults.empty() ? "" : plan.faults.to_string()},
      {"origin_layer", origin.layer},
      {"origin_cause", origin.cause},
  };
  return write_safetensors(path, tensors, metadata);
}

namespace {

constexpr const char* kDamaged =
    "; the repro is damaged: make it again with `twinpath triage --repro`";

// A repro's tensor `name` ("weight/KEY" or "value/ID") into `weights` or `values`, checked
// against the graph it claims: a weight must be one of its parameters in its shape, a value one
// of its values; anything else is a damaged file, refused before any kernel runs.
Status take_repro_tensor(const Graph& graph, const std::string& name, Tensor t, Weights& weights,
                         std::map<int, Tensor>& values) {
  if (name.rfind("weight/", 0) == 0) {
    const std::string key = name.substr(7);
    auto spec = std::find_if(graph.params.begin(), graph.params.end(),
                             [&](const ParamSpec& s) { return s.key == key; });
    if (spec == graph.params.end())
      return Error("tensor '" + excerpt(name) + "' is no parameter of " + graph.name + kDamaged);
    if (t.shape() != spec->shape)
      return Error("tensor '" + excerpt(name) + "' has shape " + shape_string(t.shape()) +
                   ", but " + graph.name + "'s " + key + " is " + shape_string(spec->shape) +
                   kDamaged);
    weights[key] = std::move(t);
    return Status();
  }
  const std::optional<int> v = name.rfind("value/", 0) == 0
                                   ? parse_number<int>(std::string_view(name).substr(6))
                                   : std::nullopt;
  if (!v || *v < 0 || std::size_t(*v) >= graph.value_names.size())
    return Error("tensor '" + excerpt(name) + "' is neither a weight/ of " + graph.name +
                 " nor a value/ID of one of its " + std::to_string(graph.value_names.size()) +
                 " values" + kDamaged);
  values[*v] = std::move(t);
  return Status();
}

// Every input the group reads is in the repro, in the shape the plan gives it.
Status check_group_values(const compiled::Plan& plan, const compiled::Group& grp,
                          const std::map<int, Tensor>& values) {
  for (int v : grp.inputs) {
    const std::string what =
        "value/" + std::to_string(v) + " (" + plan.graph->value_names.at(std::size_t(v)) + ")";
    auto it = values.find(v);
    if (it == values.end())
      return Error("the group reads " + what + ", which the repro does not hold" + kDamaged);
    const Shape& want = plan.buffers.at(v).shape;
    if (it->second.shape() != want)
      return Error(what + " has shape " + shape_string(it->second.shape()) +
                   ", but the group reads it as " + shape_string(want) + kDamaged);
  }
  return Status();
}

}  // namespace

Expected<ReplayOutcome> replay_group_repro(const std::string& path, compiled::Device device) {
  TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  const auto& m = file.metadata();
  if (meta(m, "twinpath_repro") != kReproVersion)
    return Error(path +
                 " is not a twinpath repro (no twinpath_repro metadata); make one with `twinpath "
                 "triage --repro FILE`");
  TP_ASSIGN_OR_RETURN(const nlohmann::json cj,
                      parse_untrusted_json(meta(m, "config"), path + ": its config metadata"));
  TP_ASSIGN_OR_RETURN(std::shared_ptr<const ModelConfig> config,
                      parse_model_config(cj, path + " (config)"));
  const std::string graph_name = meta(m, "graph");
  std::optional<Graph> found;
  for (Graph& g : config->family().graphs(*config))
    if (g.name == graph_name) found = std::move(g);
  if (!found)
    return Error(path + ": unknown graph '" + graph_name + "' for " +
                 with_article(config->family().class_name()));
  const Graph& graph = *found;
  // Weights the group does not read are zeros: only the group runs.
  Weights weights;
  for (const ParamSpec& s : graph.params) weights.emplace(s.key, Tensor(DType::kF32, s.shape));
  std::map<int, Tensor> values;
  for (const SafetensorsEntry& e : file.entries()) {
    TP_ASSIGN_OR_RETURN(Tensor t, file.read(e));
    if (Status s = take_repro_tensor(graph, e.name, std::move(t), weights, values); !s.ok())
      return s.error().with_context(path);
  }
  compiled::SessionOptions options;
  TP_ASSIGN_OR_RETURN(options.policy.base, compiled::parse_layer_policy(meta(m, "policy")));
  TP_ASSIGN_OR_RETURN(options.policy.keep_fp32, compiled::parse_keep_fp32(meta(m, "keep_fp32")));
  if (const std::string skip = meta(m, "cast_skip"); !skip.empty()) {
    TP_ASSIGN_OR_RETURN(options.policy.cast_skip, compiled::parse_keep_fp32(skip));
  }
  if (const std::string load = meta(m, "load"); !load.empty()) {
    TP_ASSIGN_OR_RETURN(options.policy.load, parse_dtype(load));
  }
  TP_ASSIGN_OR_RETURN(options.faults, compiled::parse_faults(meta(m, "faults")));
  TP_ASSIGN_OR_RETURN(Shape input_shape, parse_shape_text(meta(m, "input_shape")));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Backend> backend, compiled::make_backend(device));
  compiled::Session session(options, std::move(backend));
  std::vector<Shape> others;
  for (const std::string& text : split_list(meta(m, "other_input_shapes"), ';')) {
    TP_ASSIGN_OR_RETURN(Shape other, parse_shape_text(text));
    others.push_back(std::move(other));
  }
  TP_ASSIGN_OR_RETURN(const compiled::Plan* plan,
                      session.plan_for(graph, weights, input_shape, others));
  const int group = parse_number<int>(meta(m, "group")).value_or(-1);
  if (group < 0 || group >= int(plan->groups.size()) ||
      plan->groups[std::size_t(group)].checkpoints[0] != meta(m, "checkpoint"))
    return Error(path + ": group " + meta(m, "group") + " of this build's plan is not " +
                 meta(m, "checkpoint") + "; replay it with the twinpath that wrote it");

  if (Status s = check_group_values(*plan, plan->groups[std::size_t(group)], values); !s.ok())
    return s.error().with_context(path);
  ReplayOutcome out;
  out.origin = analyze_group(*plan, group, input_shape, values);
  const compiled::Group& grp = plan->groups[std::size_t(group)];
  out.text = "replay of " + meta(m, "checkpoint") + " (" + compiled::group_kind_name(grp.kind) +
             ", " + graph_name + " group " + meta(m, "group") + ") under " +
             options.policy.to_string() +
             (options.faults.empty() ? "" : ", INJECTED FAULTS " + options.faults.to_string()) +
             "\n  from case: " + meta(m, "case") + "\n";
  TP_ASSIGN_OR_RETURN(std::vector<Tensor> outputs,
                      session.run_group(*plan, group, input_shape, values));
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor f = outputs[i].to(DType::kF64);
    int64_t bad = 0;
    double max_abs = 0;
    for (int64_t k = 0; k < f.numel(); ++k) {
      const double v = f.data<double>()[k];
      if (!std::isfinite(v))
        ++bad;
      else
        max_abs = std::max(max_abs, std::fabs(v));
    }
    out.non_finite = out.non_finite || bad > 0;
    out.text += "  output " + grp.checkpoints[i] + " on " + session.backend().device() + ": " +
                std::to_string(bad) + " of " + std::to_string(f.numel()) +
                " non-finite, max |finite| " + format_number(max_abs) + " (" +
                dtype_name(outputs[i].dtype()) + ")\n";
  }
  out.text += out.origin.found
                  ? "  origin: " + out.origin.layer + " (" + out.origin.op + "), cause " +
                        out.origin.cause + "\n  " + out.origin.detail + "\n"
                  : "  " + out.origin.detail + "\n";
  return out;
}

}  // namespace tp
