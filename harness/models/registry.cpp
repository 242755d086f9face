#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/core/format.h"
#include "harness/core/names.h"
#include "harness/core/numbers.h"
#include "harness/core/untrusted_json.h"
#include "harness/models/autoencoder_kl/family.h"
#include "harness/models/autoencoder_kl_hunyuan_video/family.h"
#include "harness/models/autoencoder_tiny/family.h"
#include "harness/models/config_space.h"
#include "harness/models/family.h"
#include "harness/models/unet_2d_condition/family.h"
#include "harness/models/wan_transformer_3d/family.h"

namespace tp {
namespace {

std::vector<const Family*>& registry() {
  // The built-in families, one line each.
  static std::vector<const Family*> families = {
      &autoencoder_kl_family(),
      &autoencoder_tiny_family(),
      &unet_2d_condition_family(),
      &wan_transformer_3d_family(),
      &autoencoder_kl_hunyuan_video_family(),
  };
  return families;
}

}  // namespace

bool Family::claims(const nlohmann::json& config) const {
  auto it = config.find("_class_name");
  return it != config.end() && it->is_string() && it->get<std::string>() == class_name();
}

std::vector<ParamSpec> Family::param_specs(const ModelConfig& config) const {
  std::vector<ParamSpec> specs;
  for (Graph& g : graphs(config))
    for (ParamSpec& p : g.params)
      if (std::none_of(specs.begin(), specs.end(),
                       [&](const ParamSpec& s) { return s.key == p.key; }))
        specs.push_back(std::move(p));
  return specs;
}

const std::vector<PipelineOption>& Family::options() const {
  static const std::vector<PipelineOption> kNone;
  return kNone;
}

const PipelineDescriptor* Family::pipeline(const std::string& name) const {
  for (const PipelineDescriptor& d : pipelines())
    if (d.name == name) return &d;
  return nullptr;
}

const PipelineOption* Family::option(const std::string& key) const {
  for (const PipelineOption& o : options())
    if (o.key == key) return &o;
  return nullptr;
}

Expected<SeamBands> Family::seam_bands(const ModelConfig&, const TilingOptions&, const std::string&,
                                       const Shape&) const {
  return Error(class_name() + " has no tiling rule");
}

Expected<std::vector<std::pair<int64_t, int64_t>>> Family::tiling_points(
    const ModelConfig&, const std::string&, const TilingOptions&) const {
  return Error(class_name() + " has no tiling rule");
}

const PipelineDescriptor& Family::tradeoff_pipeline() const {
  for (const PipelineDescriptor& d : pipelines())
    if (d.tradeoff_default) return d;
  return pipelines().front();
}

PipelineDescriptor describe_pipeline(std::string name, std::string help,
                                     std::vector<std::string> inputs,
                                     std::vector<std::string> outputs, Produces produces) {
  PipelineDescriptor d;
  d.name = std::move(name);
  d.help = std::move(help);
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.produces = produces;
  return d;
}

bool PipelineDescriptor::takes(const std::string& option) const {
  return std::find(options.begin(), options.end(), option) != options.end();
}

std::string given_option(const OptionValues& values, const std::string& key) {
  for (const auto& [k, v] : values)
    if (k == key) return v;
  return "";
}

const Model* PipelineOptions::model(const std::string& key) const {
  for (const auto& [k, m] : models)
    if (k == key) return m;
  return nullptr;
}

Expected<NamedTensors> Family::select_inputs(const std::string& pipeline,
                                             const NamedTensors& tensors,
                                             const std::string& source) const {
  TP_ASSIGN_OR_RETURN(Tensor t, select_input(pipeline, tensors, source));
  return NamedTensors{{"input", std::move(t)}};
}

std::string Family::call_scope(const std::string& /*pipeline*/, const std::string& /*graph*/,
                               int call) const {
  return call == 0 ? "" : "call" + std::to_string(call) + "/";
}

Expected<NamedTensors> Family::generate_inputs(const Model& model, const InputRequest& request,
                                               const GraphRunner& reference) const {
  TP_ASSIGN_OR_RETURN(Tensor t, generate_input(model, request, reference));
  return NamedTensors{{"input", std::move(t)}};
}

Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const NamedTensors& inputs, GraphExecutor& executor,
                                 const PipelineOptions& options) {
  TP_RETURN_IF_ERROR(check_family_runs(model, pipeline));
  return model.family().run(model, pipeline, inputs, executor, options);
}

Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const NamedTensors& inputs, const GraphRunner& run,
                                 const PipelineOptions& options) {
  FunctionExecutor executor(run);
  return run_model(model, pipeline, inputs, executor, options);
}

Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const Tensor& input, GraphExecutor& executor,
                                 const PipelineOptions& options) {
  return run_model(model, pipeline, NamedTensors{{"input", input}}, executor, options);
}

Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const Tensor& input, const GraphRunner& run,
                                 const PipelineOptions& options) {
  FunctionExecutor executor(run);
  return run_model(model, pipeline, input, executor, options);
}

const std::vector<const Family*>& families() { return registry(); }

void register_family(const Family& family) {
  if (std::find(registry().begin(), registry().end(), &family) == registry().end())
    registry().push_back(&family);
}

Expected<const Family*> family_of_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) return Error(source + ": config must be a JSON object");
  for (const Family* f : families())
    if (f->claims(config)) return f;
  std::vector<std::string> classes;
  for (const Family* f : families()) classes.push_back(f->class_name());
  auto it = config.find("_class_name");
  const std::string cls = it != config.end() && it->is_string() ? it->get<std::string>() : "";
  return Error(source + ": " +
               (cls.empty() ? std::string("no _class_name, and no family recognizes the fields")
                            : "_class_name '" + cls + "' is not supported") +
               "; twinpath runs " + comma_list(classes));
}

namespace {

// No diffusers model has a size (channels, layers, blocks, embedding widths) past this; a config
// that does is damaged, and building its graph or weights would run out of time or memory first.
constexpr int64_t kMaxConfigSize = 65536;

Status check_sizes(const nlohmann::json& config, const std::string& source) {
  for (const auto& [key, value] : config.items()) {
    const auto too_large = [&](const nlohmann::json& v) {
      return (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxConfigSize)) ||
             (v.is_number_integer() && v.get<int64_t>() > kMaxConfigSize);
    };
    bool bad = too_large(value);
    if (value.is_array())
      for (const auto& item : value) bad = bad || too_large(item);
    if (bad)
      return Error(source + ": field '" + excerpt(key) + "' = " + json_excerpt(value) +
                   " is past " + std::to_string(kMaxConfigSize) +
                   ", larger than any diffusers model's; the config is damaged (compare it with "
                   "the model's original config.json)");
  }
  return Status();
}

}  // namespace

Expected<std::shared_ptr<const ModelConfig>> parse_model_config(const nlohmann::json& config,
                                                                const std::string& source) {
  TP_ASSIGN_OR_RETURN(const Family* family, family_of_config(config, source));
  if (config.is_object()) TP_RETURN_IF_ERROR(check_sizes(config, source));
  return family->parse_config(config, source);
}

Expected<std::shared_ptr<const ModelConfig>> load_model_config(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return Error(path +
                 ": cannot open the model config (a diffusers model folder holds config.json)");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  JsonReadOptions options;
  options.comments = true;
  TP_ASSIGN_OR_RETURN(const nlohmann::json j, parse_untrusted_json(text, path, options));
  return parse_model_config(j, path);
}

std::vector<std::string> builtin_config_names() {
  std::vector<std::string> names;
  for (const Family* f : families())
    for (std::string& n : f->builtin_names()) names.push_back(std::move(n));
  return names;
}

namespace {

Expected<std::string> drawn_config_text(const std::string& name) {
  TP_ASSIGN_OR_RETURN(RandomConfigName r, parse_random_config_name(name));
  for (const Family* f : families())
    if (const ConfigSpace* space = f->config_space(); space && space->family == r.family) {
      ConfigDraw draw(r.family, r.seed);
      nlohmann::json j = space->draw(draw);
      j["_twinpath_draw"] = kRandomConfigPrefix + r.family + ":" + std::to_string(r.seed);
      return json_text(j, 2);
    }
  const std::vector<std::string> names = config_space_names();
  return Error("'" + excerpt(name) + "' names no family with a config space; draw from " +
               comma_list(names) + ", e.g. random:" + names.front() + ":1" +
               did_you_mean(r.family, names));
}

}  // namespace

std::vector<std::string> config_space_names() {
  std::vector<std::string> names;
  for (const Family* f : families())
    if (const ConfigSpace* space = f->config_space()) names.push_back(space->family);
  return names;
}

bool names_builtin_config(const std::string& name) {
  const std::vector<std::string> names = builtin_config_names();
  return is_random_config_name(name) || std::find(names.begin(), names.end(), name) != names.end();
}

Expected<std::string> builtin_config_text(const std::string& name) {
  if (is_random_config_name(name)) return drawn_config_text(name);
  for (const Family* f : families())
    for (const std::string& n : f->builtin_names())
      if (n == name) return f->builtin_text(name);
  return Error("unknown built-in config '" + excerpt(name) + "'; use one of " +
               comma_list(builtin_config_names()) + " or a config.json path" +
               did_you_mean(name, builtin_config_names()));
}

std::vector<std::string> pipeline_names() {
  std::vector<std::string> names;
  for (const Family* f : families())
    for (const PipelineDescriptor& d : f->pipelines())
      if (std::find(names.begin(), names.end(), d.name) == names.end()) names.push_back(d.name);
  return names;
}

bool is_pipeline_name(const std::string& name) { return find_pipeline(name) != nullptr; }

const PipelineDescriptor* find_pipeline(const std::string& name) {
  for (const Family* f : families())
    if (const PipelineDescriptor* d = f->pipeline(name)) return d;
  return nullptr;
}

std::string pipelines_help() {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const Family* f : families())
    for (const PipelineDescriptor& d : f->pipelines())
      if (std::none_of(lines.begin(), lines.end(),
                       [&](const auto& l) { return l.first == d.name; }))
        lines.emplace_back(d.name, d.help);
  std::size_t width = 0;
  for (const auto& l : lines) width = std::max(width, l.first.size());
  std::string s;
  for (const auto& [name, help] : lines)
    s += "  " + name + std::string(width + 2 - name.size(), ' ') + help + "\n";
  return s;
}

std::string pipelines_where(const std::function<bool(const PipelineDescriptor&)>& pred,
                            const std::string& last_joiner) {
  std::vector<std::string> names;
  for (const std::string& name : pipeline_names())
    if (pred(*find_pipeline(name))) names.push_back(name);
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? last_joiner : ", ") + names[i];
  return s;
}

Status check_family_runs(const Model& model, const std::string& pipeline) {
  const Family& f = model.family();
  if (f.runs(pipeline)) return Status();
  std::vector<std::string> names;
  for (const PipelineDescriptor& d : f.pipelines()) names.push_back(d.name);
  return Error("model " + model.dir + " is " + with_article(f.class_name()) + ", which runs " +
               comma_list(names) + ", not " + pipeline);
}

std::vector<const PipelineOption*> all_pipeline_options() {
  std::vector<const PipelineOption*> all;
  for (const Family* f : families())
    for (const PipelineOption& o : f->options())
      if (std::none_of(all.begin(), all.end(), [&](const auto* a) { return a->key == o.key; }))
        all.push_back(&o);
  return all;
}

const PipelineOption* pipeline_option(const std::string& pipeline, const std::string& key) {
  for (const Family* f : families())
    if (const PipelineDescriptor* d = f->pipeline(pipeline); d && d->takes(key))
      if (const PipelineOption* o = f->option(key)) return o;
  return nullptr;
}

Status set_pipeline_option(OptionValues& values, const std::string& pipeline,
                           const std::string& key, std::string_view value,
                           const std::string& spelled) {
  const PipelineOption* o = pipeline_option(pipeline, key);
  if (!o) {
    const std::string owners =
        pipelines_where([&](const PipelineDescriptor& d) { return d.takes(key); }, " and ");
    if (owners.empty()) return Error(spelled + " is not an option of any pipeline");
    const PipelineOption* any = nullptr;
    for (const PipelineOption* a : all_pipeline_options())
      if (a->key == key) any = a;
    return Error(spelled + " is an option of " + owners + " (" + (any ? any->help : "") + "); " +
                 pipeline + " does not take it: drop it");
  }
  TP_ASSIGN_OR_RETURN(std::string canonical, o->parse(value));
  values.erase(
      std::remove_if(values.begin(), values.end(), [&](const auto& kv) { return kv.first == key; }),
      values.end());
  if (canonical != o->default_value) values.emplace_back(key, std::move(canonical));
  return Status();
}

OptionValues ordered_options(const std::string& pipeline, const OptionValues& values) {
  OptionValues out;
  for (const Family* f : families())
    if (f->runs(pipeline))
      for (const PipelineOption& o : f->options())
        for (const auto& kv : values)
          if (kv.first == o.key &&
              std::none_of(out.begin(), out.end(), [&](const auto& x) { return x.first == o.key; }))
            out.push_back(kv);
  return out;
}

Status check_required_models(const std::string& pipeline, const OptionValues& given) {
  const PipelineDescriptor* d = find_pipeline(pipeline);
  if (!d) return Status();
  for (const OtherModel& m : d->models) {
    if (!m.required || !given_option(given, m.option).empty()) continue;
    const PipelineOption* o = pipeline_option(pipeline, m.option);
    const std::string flag = "--" + (o ? o->flag : m.option);
    return Error(pipeline + " " + m.purpose + ": add " + m.option + "=MODEL to the case (" + flag +
                 " on exec, triage and tradeoff); " + (o ? o->help : ""));
  }
  return Status();
}

std::string option_text(const Family& family, const PipelineOptions& options,
                        const std::string& key) {
  if (std::string v = given_option(options.values, key); !v.empty()) return v;
  const PipelineOption* o = family.option(key);
  return o ? o->default_value : "";
}

double option_number(const Family& family, const PipelineOptions& options, const std::string& key) {
  // PipelineOption::parse checked the text; a default is the family's own.
  return parse_number<double>(option_text(family, options, key)).value_or(0);
}

}  // namespace tp
