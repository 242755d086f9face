#include "harness/models/vae/vae_family.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/core/rng.h"
#include "harness/models/vae/pipeline.h"
#include "harness/models/vae/procedural_image.h"
#include "harness/models/vae/vae_graphs.h"

namespace tp {

std::string VaeFamily::class_name() const { return arch_.class_name; }

bool VaeFamily::claims(const nlohmann::json& config) const {
  if (config.contains("_class_name")) return Family::claims(config);
  return arch_.claims_unnamed(config);
}

Expected<std::shared_ptr<const ModelConfig>> VaeFamily::parse_config(
    const nlohmann::json& config, const std::string& source) const {
  if (!config.is_object()) return Error(source + ": config must be a JSON object");
  TP_ASSIGN_OR_RETURN(std::shared_ptr<VaeConfig> c, arch_.parse(config, source));
  c->owner = this;
  return std::shared_ptr<const ModelConfig>(std::move(c));
}

std::vector<std::string> VaeFamily::builtin_names() const {
  std::vector<std::string> names;
  for (const auto& [name, text] : builtins_) names.push_back(name);
  return names;
}

std::string VaeFamily::builtin_text(const std::string& name) const {
  for (const auto& [n, text] : builtins_)
    if (n == name) return text;
  return "";
}

std::vector<Graph> VaeFamily::graphs(const ModelConfig& config) const {
  return model_graphs(dynamic_cast<const VaeConfig&>(config));
}

std::vector<ParamSpec> VaeFamily::param_specs(const ModelConfig& config) const {
  return model_param_specs(dynamic_cast<const VaeConfig&>(config));
}

namespace {

// encode, decode and roundtrip, with diffusers' names for their inputs and outputs (the KL
// encoder's posterior is its mean and logvar; the Tiny encoder's output is its latents).
std::vector<PipelineDescriptor> vae_pipelines(const std::vector<std::string>& latents) {
  PipelineDescriptor encode =
      describe_pipeline("vae.encode", "image [B,C,H,W] in [-1,1] -> latents (KL: mean, logvar)",
                        {"sample"}, latents, Produces::kLatents);
  PipelineDescriptor decode = describe_pipeline("vae.decode", "latents [B,L,H/f,W/f] -> image",
                                                {"latents"}, {"sample"}, Produces::kImage);
  PipelineDescriptor roundtrip =
      describe_pipeline("vae.roundtrip", "image -> encoder -> decoder (co-resident) -> image",
                        {"sample"}, {"sample"}, Produces::kImage);
  roundtrip.handoff = Handoff{"vae.encoder", latents.front(), "vae.decoder",
                              "encoder.",    "vae.encode",    "vae.decode"};
  for (PipelineDescriptor* d : {&encode, &decode, &roundtrip}) {
    d->tradeoff_input = "image";
    d->tiles = true;
  }
  decode.tradeoff_default = true;
  return {encode, decode, roundtrip};
}

}  // namespace

VaeFamily::VaeFamily(VaeArchitecture architecture,
                     std::vector<std::pair<std::string, std::string>> builtins)
    : arch_(std::move(architecture)),
      builtins_(std::move(builtins)),
      pipelines_(vae_pipelines(arch_.encoder_outputs)) {}

Expected<Shape> VaeFamily::input_shape(const ModelConfig& config, const std::string& pipeline,
                                       int64_t height, int64_t width, const OptionValues&) const {
  const auto& c = dynamic_cast<const VaeConfig&>(config);
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  if (p != Pipeline::kDecode) return Shape{1, c.image_channels(), height, width};
  const int64_t ds = c.downscale();
  if (height % ds || width % ds)
    return Error("res=" + std::to_string(height) + "x" + std::to_string(width) +
                 " is not a multiple of the model's " + std::to_string(ds) +
                 "x downscale, so it has no latent size; use a multiple of " + std::to_string(ds));
  return Shape{1, c.latent_channels(), height / ds, width / ds};
}

int64_t VaeFamily::input_scale(const ModelConfig& config, const std::string& pipeline) const {
  return pipeline == "vae.decode" ? dynamic_cast<const VaeConfig&>(config).downscale() : 1;
}

Expected<Tensor> VaeFamily::select_input(const std::string& pipeline, const NamedTensors& tensors,
                                         const std::string& source) const {
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  return select_pipeline_input(p, tensors, source);
}

Status VaeFamily::check_input(const Model& model, const std::string& pipeline,
                              const Tensor& input) const {
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  return check_pipeline_input(model, p, input);
}

// Seeded inputs: decode latents ~ N(0, sigma^2); encode images ~ U(-1, 1) * sigma (already in
// the image processor's [-1, 1]). input=image: a procedural picture; a decoder gets the
// reference encoder's latents of it (the KL mean).
Expected<Tensor> VaeFamily::generate_input(const Model& model, const InputRequest& r,
                                           const GraphRunner& reference) const {
  const VaeConfig& c = vae_config(model);
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(r.pipeline));
  TP_ASSIGN_OR_RETURN(Shape shape, input_shape(c, r.pipeline, r.height, r.width, r.options));
  const bool latents = p == Pipeline::kDecode;
  if (r.image) {
    Tensor image = procedural_image(r.seed, c.image_channels(), r.height, r.width);
    if (!latents) return image;
    const Graph encoder = build_encoder_graph(c);
    TP_ASSIGN_OR_RETURN(NamedTensors z,
                        reference(encoder, model.weights, {{encoder.inputs[0].first, image}}));
    return z[0].second.to(DType::kF32);
  }
  Tensor t(DType::kF32, shape);
  Rng rng(r.seed, "input");
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (latents) {
      d[i] = float(rng.normal(r.sigma));
    } else {
      d[i] = float(r.sigma * rng.uniform(-1, 1));
    }
  }
  return t;
}

Expected<NamedTensors> VaeFamily::run(const Model& model, const std::string& pipeline,
                                      const NamedTensors& inputs, GraphExecutor& executor,
                                      const PipelineOptions& options) const {
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  TP_ASSIGN_OR_RETURN(Tensor input, select_pipeline_input(p, inputs, pipeline + "'s inputs"));
  return run_pipeline(model, p, input, executor, options.tiling, options.stage_outputs);
}

Expected<std::vector<Stage>> VaeFamily::stages(const Model& model, const std::string& pipeline,
                                               const Shape& input) const {
  const VaeConfig& c = vae_config(model);
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  if (p == Pipeline::kDecode) return std::vector<Stage>{{build_decoder_graph(c), input, ""}};
  std::vector<Stage> stages{{build_encoder_graph(c), input, ""}};
  if (p == Pipeline::kRoundtrip)
    stages.push_back({build_decoder_graph(c), {}, this->pipeline(pipeline)->handoff->output});
  return stages;
}

}  // namespace tp
