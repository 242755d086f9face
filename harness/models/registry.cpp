#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/models/autoencoder_kl/family.h"
#include "harness/models/autoencoder_tiny/family.h"
#include "harness/models/family.h"
#include "harness/models/unet_2d_condition/family.h"

namespace tp {
namespace {

std::vector<const Family*>& registry() {
  // The built-in families, one line each.
  static std::vector<const Family*> families = {
      &autoencoder_kl_family(),
      &autoencoder_tiny_family(),
      &unet_2d_condition_family(),
  };
  return families;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
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

bool Family::runs(const std::string& pipeline) const {
  for (const auto& [name, help] : pipelines())
    if (name == pipeline) return true;
  return false;
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
               "; twinpath runs " + joined(classes));
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
      return Error(source + ": field '" + key + "' = " + value.dump() + " is past " +
                   std::to_string(kMaxConfigSize) +
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
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false,
                                           /*ignore_comments=*/true);
  if (j.is_discarded()) return Error(path + ": not valid JSON");
  return parse_model_config(j, path);
}

std::vector<std::string> builtin_config_names() {
  std::vector<std::string> names;
  for (const Family* f : families())
    for (std::string& n : f->builtin_names()) names.push_back(std::move(n));
  return names;
}

Expected<std::string> builtin_config_text(const std::string& name) {
  for (const Family* f : families())
    for (const std::string& n : f->builtin_names())
      if (n == name) return f->builtin_text(name);
  return Error("unknown built-in config '" + name + "'; use one of " +
               joined(builtin_config_names()) + " or a config.json path");
}

std::vector<std::string> pipeline_names() {
  std::vector<std::string> names;
  for (const Family* f : families())
    for (const auto& [name, help] : f->pipelines())
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}

bool is_pipeline_name(const std::string& name) {
  const std::vector<std::string> names = pipeline_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_denoising_pipeline(const std::string& name) {
  for (const Family* f : families())
    if (f->runs(name) && f->denoises(name)) return true;
  return false;
}

std::string pipelines_help() {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const Family* f : families())
    for (auto& line : f->pipelines())
      if (std::none_of(lines.begin(), lines.end(),
                       [&](const auto& l) { return l.first == line.first; }))
        lines.push_back(std::move(line));
  std::size_t width = 0;
  for (const auto& l : lines) width = std::max(width, l.first.size());
  std::string s;
  for (const auto& [name, help] : lines)
    s += "  " + name + std::string(width + 2 - name.size(), ' ') + help + "\n";
  return s;
}

Status check_family_runs(const Model& model, const std::string& pipeline) {
  const Family& f = model.family();
  if (f.runs(pipeline)) return Status();
  std::vector<std::string> names;
  for (const auto& [name, help] : f.pipelines()) names.push_back(name);
  return Error("model " + model.dir + " is a " + f.class_name() + ", which runs " + joined(names) +
               ", not " + pipeline);
}

Status check_other_models(const std::string& pipeline, bool vae, bool refiner,
                          const std::string& vae_flag, const std::string& refiner_flag) {
  bool decodes = false, refines = false;
  for (const Family* f : families())
    if (f->runs(pipeline)) {
      decodes = decodes || (f->denoises(pipeline) && f->image_output(pipeline));
      refines = refines || f->takes_refiner(pipeline);
    }
  if (vae && !decodes)
    return Error(vae_flag + " names the VAE that decodes a text-to-image pipeline's latents; " +
                 pipeline +
                 " runs no VAE beside its model (sdxl.txt2img and sdxl.base+refiner do): drop it");
  if (refiner && !refines)
    return Error(refiner_flag + " names the refiner of sdxl.base+refiner; " + pipeline +
                 " runs no refiner: drop it");
  return Status();
}

std::size_t Family::output_count(const Model& model, const std::string& pipeline) const {
  auto s = stages(model, pipeline, {});
  return s.ok() && !s->empty() ? s->back().graph.outputs.size() : 1;
}

}  // namespace tp
