#include "harness/models/unet_2d_condition/family.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/core/rng.h"
#include "harness/models/unet_2d_condition/euler_scheduler.h"
#include "harness/models/unet_2d_condition/sdxl_pipelines.h"
#include "harness/models/unet_2d_condition/unet_config.h"

namespace tp {
namespace {

// Image pixels per latent pixel: the VAE's downscale the UNet's latents come from (8 for SD and
// SDXL), so a case's res= is the image's size as for vae.decode.
constexpr int64_t kLatentScale = 8;

const UnetConfig& unet(const ModelConfig& c) { return dynamic_cast<const UnetConfig&>(c); }

// unet.step's inputs, as diffusers' UNet2DConditionModel.forward names its arguments.
std::vector<std::string> input_names(const UnetConfig& c) {
  std::vector<std::string> names{"sample", "timestep", "encoder_hidden_states"};
  if (c.text_time) {
    names.emplace_back("text_embeds");
    names.emplace_back("time_ids");
  }
  return names;
}

// unet.step, and SDXL's pipelines around the UNet: its denoising loop, text-to-image with a
// VAE, the refiner's loop, and base + refiner. Inputs and outputs by diffusers' names.
std::vector<PipelineDescriptor> sdxl_pipelines() {
  const std::vector<std::string> prompt{"latents", "prompt_embeds", "pooled_prompt_embeds",
                                        "negative_prompt_embeds", "negative_pooled_prompt_embeds"};
  const OtherModel vae{"vae", true, "decodes the latents with a VAE", ""};
  const OtherModel refiner{"refiner", true, "hands the base's latents to a refiner", kRefinerPart};
  PipelineDescriptor step =
      describe_pipeline("unet.step",
                        "one denoiser call: sample, timestep, encoder_hidden_states [, "
                        "text_embeds, time_ids] -> sample",
                        {"sample", "timestep", "encoder_hidden_states", "text_embeds", "time_ids"},
                        {"sample"}, Produces::kNoisePrediction);
  PipelineDescriptor denoise =
      describe_pipeline("sdxl.denoise",
                        "SDXL's Euler loop with guidance: latents, prompt_embeds, "
                        "pooled_prompt_embeds [, negative_*] -> latents",
                        prompt, {"latents"}, Produces::kLatents);
  denoise.options = {"steps", "guidance"};
  PipelineDescriptor txt2img =
      describe_pipeline("sdxl.txt2img",
                        "sdxl.denoise, then the VAE's decode (vae=MODEL, --vae DIR) of "
                        "latents / scaling_factor -> sample",
                        prompt, {"sample"}, Produces::kImage);
  txt2img.options = {"vae", "steps", "guidance"};
  txt2img.models = {vae};
  PipelineDescriptor refine =
      describe_pipeline("sdxl.refine",
                        "the refiner's loop from the base's latents at denoising_start "
                        "(split=F): latents, prompt_embeds, pooled_prompt_embeds [, "
                        "negative_*] -> latents",
                        prompt, {"latents"}, Produces::kLatents);
  refine.options = {"split", "steps", "guidance"};
  PipelineDescriptor both =
      describe_pipeline("sdxl.base+refiner",
                        "the base to denoising_end, the refiner (refiner=MODEL) from there, one "
                        "VAE (vae=MODEL) shared by both -> sample, base.sample, base.latents",
                        prompt, {"sample", "base.sample", "base.latents"}, Produces::kImage);
  both.options = {"vae", "refiner", "split", "steps", "guidance"};
  both.models = {vae, refiner};
  for (PipelineDescriptor* d : {&denoise, &txt2img, &refine, &both}) d->denoising = Denoising{};
  for (PipelineDescriptor* d : {&step, &denoise, &txt2img, &refine, &both})
    d->train_timesteps = kTrainTimesteps;
  return {step, denoise, txt2img, refine, both};
}

class UnetFamily : public Family {
 public:
  // Whether `name` is one of the denoising loops.
  bool denoises(const std::string& name) const {
    const PipelineDescriptor* d = pipeline(name);
    return d && d->denoising;
  }

  std::string class_name() const override { return "UNet2DConditionModel"; }
  const ConfigSpace* config_space() const override { return &unet_2d_condition_config_space(); }

  Expected<std::shared_ptr<const ModelConfig>> parse_config(
      const nlohmann::json& config, const std::string& source) const override {
    TP_ASSIGN_OR_RETURN(UnetConfig c, parse_unet_config(config, source));
    return std::shared_ptr<const ModelConfig>(std::make_shared<UnetConfig>(std::move(c)));
  }

  std::vector<std::string> builtin_names() const override {
    std::vector<std::string> names;
    for (const auto& [name, text] : builtins()) names.push_back(name);
    return names;
  }
  std::string builtin_text(const std::string& name) const override {
    for (const auto& [n, text] : builtins())
      if (n == name) return text;
    return "";
  }

  // The UNet, and for SDXL UNets the scheduler's graphs sdxl.* runs beside it.
  std::vector<Graph> graphs(const ModelConfig& c) const override {
    std::vector<Graph> all{build_unet_graph(unet(c))};
    if (!unet(c).text_time) return all;
    all.push_back(build_euler_init_graph());
    all.push_back(build_unscale_latents_graph());
    for (bool guided : {false, true}) {
      all.push_back(build_euler_scale_graph(guided ? 2 : 1));
      all.push_back(build_euler_step_graph(guided));
    }
    return all;
  }

  const std::vector<PipelineDescriptor>& pipelines() const override {
    static const std::vector<PipelineDescriptor> kPipelines = sdxl_pipelines();
    return kPipelines;
  }
  const std::vector<PipelineOption>& options() const override { return sdxl_options(); }

  Expected<Shape> input_shape(const ModelConfig& config, const std::string&, int64_t height,
                              int64_t width, const OptionValues&) const override {
    if (height % kLatentScale || width % kLatentScale)
      return Error("res=" + std::to_string(height) + "x" + std::to_string(width) +
                   " is not a multiple of the VAE's 8x downscale, so it has no latent size; use "
                   "a multiple of 8");
    return Shape{1, unet(config).in_channels, height / kLatentScale, width / kLatentScale};
  }
  int64_t input_scale(const ModelConfig&, const std::string&) const override {
    return kLatentScale;
  }

  Expected<Tensor> select_input(const std::string& pipeline, const NamedTensors& tensors,
                                const std::string& source) const override {
    const char* primary = denoises(pipeline) ? "latents" : "sample";
    if (const Tensor* t = find_tensor(tensors, primary)) return *t;
    return Error(source + ": " + pipeline + " reads a tensor named '" + primary +
                 "' (the latents)");
  }

  // The file's tensors named as diffusers' UNet arguments (run() checks which the config needs).
  Expected<NamedTensors> select_inputs(const std::string& pipeline, const NamedTensors& tensors,
                                       const std::string& source) const override {
    const std::vector<const char*> names =
        denoises(pipeline)
            ? std::vector<const char*>{"latents", "prompt_embeds", "pooled_prompt_embeds",
                                       "negative_prompt_embeds", "negative_pooled_prompt_embeds"}
            : std::vector<const char*>{"sample", "timestep", "encoder_hidden_states", "text_embeds",
                                       "time_ids"};
    NamedTensors out;
    std::string wanted;
    for (const char* name : names) {
      if (const Tensor* t = find_tensor(tensors, name)) out.emplace_back(name, *t);
      wanted += (wanted.empty() ? "" : ", ") + std::string(name);
    }
    if (out.empty())
      return Error(source + ": " + pipeline + " reads tensors named as diffusers' arguments (" +
                   wanted + "); the file has none");
    return out;
  }

  Status check_input(const Model& model, const std::string& pipeline,
                     const Tensor& input) const override {
    return check_sample(unet(*model.config), pipeline, input);
  }

  static Status check_sample(const UnetConfig& c, const std::string& pipeline,
                             const Tensor& sample) {
    if (sample.rank() != 4 || sample.dim(1) != c.in_channels || sample.numel() == 0)
      return Error(pipeline + " takes a sample of shape [batch, " + std::to_string(c.in_channels) +
                   ", height, width], but it is " + shape_string(sample.shape()));
    return Status();
  }

  // Seeded inputs of one denoiser call on [1, C, res/8]: the sample ~ N(0, sigma^2) (a
  // scaled model input), a whole timestep in [0, 1000), encoder_hidden_states ~ N(0, 1) over 77
  // tokens (CLIP's), and for text_time a pooled text embedding ~ N(0, 1) and the time ids the
  // SDXL pipeline derives from the resolution (original = target size, crops 0).
  Expected<Tensor> generate_input(const Model& model, const InputRequest& r,
                                  const GraphRunner& reference) const override {
    TP_ASSIGN_OR_RETURN(NamedTensors all, generate_inputs(model, r, reference));
    return all.front().second;
  }
  Expected<NamedTensors> generate_inputs(const Model& model, const InputRequest& r,
                                         const GraphRunner&) const override {
    if (r.image)
      return Error("input=image is a VAE's; a UNet case takes input=normal[*SIGMA] or a file");
    const UnetConfig& c = unet(*model.config);
    TP_ASSIGN_OR_RETURN(Shape shape, input_shape(c, r.pipeline, r.height, r.width, r.options));
    auto normal = [&](const Shape& s, const char* stream, double sigma) {
      Tensor t(DType::kF32, s);
      Rng rng(r.seed, stream);
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.normal(sigma));
      return t;
    };
    NamedTensors out;
    if (denoises(r.pipeline)) {
      // The pipeline's arguments: unscaled initial noise, the prompt's and a negative prompt's
      // embeddings (77 tokens) and pooled embeddings, as the SDXL pipeline takes them.
      if (!c.text_time)
        return Error(r.pipeline + " runs SDXL UNets (addition_embed_type text_time); " + model.dir +
                     " has none");
      const int64_t n_ids = r.pipeline == "sdxl.refine" ? 5 : 6;  // the refiner's aesthetic ids
      const int64_t text_dim =
          c.projection_class_embeddings_input_dim - n_ids * int64_t(c.addition_time_embed_dim);
      out.emplace_back("latents", normal(shape, "input", r.sigma));
      for (const char* prefix : {"", "negative_"}) {
        const std::string p = prefix;
        out.emplace_back(p + "prompt_embeds", normal({1, 77, c.cross_attention_dim[0]},
                                                     (p + "prompt_embeds").c_str(), 1));
        out.emplace_back(p + "pooled_prompt_embeds",
                         normal({1, text_dim}, (p + "pooled_prompt_embeds").c_str(), 1));
      }
      return out;
    }
    out.emplace_back("sample", normal(shape, "input", r.sigma));
    Tensor t(DType::kF32, {1});
    Rng rng(r.seed, "timestep");
    t.data<float>()[0] = float(std::floor(rng.uniform(0, 1000)));
    out.emplace_back("timestep", t);
    out.emplace_back("encoder_hidden_states",
                     normal({1, 77, c.cross_attention_dim[0]}, "encoder_hidden_states", 1));
    if (c.text_time) {
      // SDXL's pooled text embedding is 1280 wide: the refiner's 5 ids leave that; else 6 ids.
      const int64_t add = c.addition_time_embed_dim, proj = c.projection_class_embeddings_input_dim;
      const int64_t n_ids = proj - 5 * add == 1280 ? 5 : 6;
      out.emplace_back("text_embeds", normal({1, proj - n_ids * add}, "text_embeds", 1));
      Tensor ids(DType::kF32, {1, n_ids});
      const float h = float(r.height), w = float(r.width);
      const float six[] = {h, w, 0, 0, h, w}, five[] = {h, w, 0, 0, 6};  // 6: aesthetic score
      for (int64_t i = 0; i < n_ids; ++i) ids.data<float>()[i] = n_ids == 5 ? five[i] : six[i];
      out.emplace_back("time_ids", ids);
    }
    return out;
  }

  Expected<NamedTensors> bind_inputs(const Model& model, const std::string& pipeline,
                                     const NamedTensors& inputs) const override {
    if (pipeline != "unet.step") return inputs;
    return bind(unet(*model.config), pipeline, inputs);
  }

  Expected<NamedTensors> run(const Model& model, const std::string& pipeline,
                             const NamedTensors& inputs, GraphExecutor& executor,
                             const PipelineOptions& options) const override {
    const UnetConfig& c = unet(*model.config);
    const SdxlOptions loop = sdxl_loop_options(*this, options);
    if (pipeline == "sdxl.denoise") return run_sdxl_denoise(model, c, inputs, executor, loop);
    if (pipeline == "sdxl.txt2img") return run_sdxl_txt2img(model, c, inputs, executor, loop);
    if (pipeline == "sdxl.refine") return run_sdxl_refine(model, c, inputs, executor, loop);
    if (pipeline == "sdxl.base+refiner")
      return run_sdxl_base_refiner(model, c, inputs, executor, loop);
    TP_ASSIGN_OR_RETURN(NamedTensors named, bind(c, pipeline, inputs));
    return executor.run(build_unet_graph(c), model.weights, named);
  }

  Expected<std::vector<Stage>> stages(const Model& model, const std::string& pipeline,
                                      const Shape& input) const override {
    if (pipeline != "unet.step")
      return Error(pipeline + " compiles its plans as its loop runs them (no stages ahead yet)");
    return std::vector<Stage>{{build_unet_graph(unet(*model.config)), input, ""}};
  }
  // The UNet's blocks end in GroupNorm/LayerNorm-fed residual sums: each group's rounding error
  // reaches the output damped (measured: docs/tolerances.md). The scheduler's graphs hand their
  // rounding straight on.
  bool damps_errors(const std::string& graph) const override { return graph == "unet"; }
  // The denoising loop's calls by step, as diffusers counts them (from 0): the UNet and the
  // scheduler's per-step graphs of step 3 under "step3/".
  std::string call_scope(const std::string& pipeline, const std::string& graph,
                         int call) const override {
    if (denoises(pipeline) && graph != "euler.init" &&
        (graph == "unet" || graph.rfind("euler.", 0) == 0))
      return "step" + std::to_string(call) + "/";
    return Family::call_scope(pipeline, graph, call);
  }

  // The pipeline's inputs checked against the config, in the graph's order; a scalar timestep
  // is broadcast to the batch (as diffusers expands it).
  static Expected<NamedTensors> bind(const UnetConfig& c, const std::string& pipeline,
                                     const NamedTensors& inputs) {
    NamedTensors out;
    for (const std::string& name : input_names(c)) {
      const Tensor* t = find_tensor(inputs, name);
      if (!t) {
        std::string have;
        for (const auto& [n, v] : inputs) have += (have.empty() ? "" : ", ") + n;
        return Error(pipeline + " reads '" + name + "', which the inputs (" + have +
                     ") do not hold; name the tensors as diffusers' UNet arguments: sample, "
                     "timestep, encoder_hidden_states" +
                     std::string(c.text_time ? ", text_embeds, time_ids" : ""));
      }
      out.emplace_back(name, t->to(t->dtype() == DType::kF64 ? DType::kF64 : DType::kF32));
    }
    const Tensor& sample = out[0].second;
    TP_RETURN_IF_ERROR(check_sample(c, pipeline, sample));
    const int64_t batch = sample.dim(0);
    Tensor& timestep = out[1].second;
    if (timestep.numel() == 1) {
      const Tensor one = timestep.to(DType::kF64);
      Tensor filled(DType::kF64, {batch});
      for (int64_t i = 0; i < batch; ++i) filled.data<double>()[i] = one.data<double>()[0];
      timestep = filled.to(timestep.dtype());
    } else if (timestep.rank() != 1 || timestep.dim(0) != batch) {
      return Error(pipeline + " takes a timestep that is a scalar or [" + std::to_string(batch) +
                   "], not " + shape_string(timestep.shape()));
    }
    const Tensor& ehs = out[2].second;
    const int dc = c.cross_attention_dim[0];
    if (ehs.rank() != 3 || ehs.dim(0) != batch || ehs.dim(2) != dc)
      return Error(pipeline + " takes encoder_hidden_states of shape [" + std::to_string(batch) +
                   ", tokens, " + std::to_string(dc) + "], not " + shape_string(ehs.shape()));
    if (c.text_time) {
      const Tensor &text = out[3].second, &ids = out[4].second;
      const int64_t n_ids = ids.rank() == 2 ? ids.dim(1) : 0;
      const int64_t text_dim =
          c.projection_class_embeddings_input_dim - n_ids * int64_t(c.addition_time_embed_dim);
      if (ids.rank() != 2 || ids.dim(0) != batch || text.rank() != 2 || text.dim(0) != batch ||
          text.dim(1) != text_dim)
        return Error(pipeline + " takes text_embeds [" + std::to_string(batch) +
                     ", D] and time_ids [" + std::to_string(batch) + ", n] with D + n * " +
                     std::to_string(c.addition_time_embed_dim) + " = " +
                     std::to_string(c.projection_class_embeddings_input_dim) + "; given " +
                     shape_string(text.shape()) + " and " + shape_string(ids.shape()));
    }
    return out;
  }

  // tiny-unet, tiny-unet-xl, tiny-unet-xl-refiner: small models of SD 1.5's and SDXL's UNets
  // and of SDXL's refiner (5 time ids, a narrower context: the last 24 of the base's 32 columns,
  // as the refiner reads text_encoder_2's part of the base's embeddings) (unet-facts 10), seconds
  // on the CPU. sd15-unet: runwayml/stable-diffusion-v1-5 unet/config.json. sdxl-base: SDXL base
  // 1.0 unet/config.json. sdxl-refiner: the refiner's, derived from its SGM parameters.
  static const std::vector<std::pair<std::string, std::string>>& builtins() {
    static const std::vector<std::pair<std::string, std::string>> kConfigs = {
        {"tiny-unet", R"({"_class_name": "UNet2DConditionModel", "sample_size": 16,
 "in_channels": 4, "out_channels": 4,
 "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
 "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
 "block_out_channels": [8, 16, 16], "layers_per_block": 2, "attention_head_dim": 2,
 "cross_attention_dim": 16, "norm_num_groups": 4, "norm_eps": 1e-05,
 "use_linear_projection": false, "flip_sin_to_cos": true, "freq_shift": 0, "act_fn": "silu",
 "mid_block_type": "UNetMidBlock2DCrossAttn"})"},
        {"tiny-unet-xl", R"({"_class_name": "UNet2DConditionModel", "sample_size": 16,
 "in_channels": 4, "out_channels": 4,
 "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"],
 "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"],
 "block_out_channels": [16, 32], "layers_per_block": 2, "transformer_layers_per_block": [1, 2],
 "attention_head_dim": [2, 4], "cross_attention_dim": 32, "norm_num_groups": 8,
 "norm_eps": 1e-05, "use_linear_projection": true, "addition_embed_type": "text_time",
 "addition_time_embed_dim": 8, "projection_class_embeddings_input_dim": 80,
 "flip_sin_to_cos": true, "freq_shift": 0, "act_fn": "silu",
 "mid_block_type": "UNetMidBlock2DCrossAttn"})"},
        {"tiny-unet-xl-refiner", R"({"_class_name": "UNet2DConditionModel", "sample_size": 16,
 "in_channels": 4, "out_channels": 4,
 "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"],
 "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"],
 "block_out_channels": [24, 48], "layers_per_block": 2, "transformer_layers_per_block": 2,
 "attention_head_dim": [3, 6], "cross_attention_dim": 24, "norm_num_groups": 8,
 "norm_eps": 1e-05, "use_linear_projection": true, "addition_embed_type": "text_time",
 "addition_time_embed_dim": 8, "projection_class_embeddings_input_dim": 72,
 "flip_sin_to_cos": true, "freq_shift": 0, "act_fn": "silu",
 "mid_block_type": "UNetMidBlock2DCrossAttn"})"},
        {"sd15-unet", R"({"_class_name": "UNet2DConditionModel", "_diffusers_version": "0.6.0",
 "act_fn": "silu", "attention_head_dim": 8, "block_out_channels": [320, 640, 1280, 1280],
 "center_input_sample": false, "cross_attention_dim": 768,
 "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
 "downsample_padding": 1, "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4,
 "layers_per_block": 2, "mid_block_scale_factor": 1, "norm_eps": 1e-05, "norm_num_groups": 32,
 "out_channels": 4, "sample_size": 64,
 "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"]})"},
        {"sdxl-base",
         R"({"_class_name": "UNet2DConditionModel", "_diffusers_version": "0.19.0.dev0",
 "act_fn": "silu", "addition_embed_type": "text_time", "addition_embed_type_num_heads": 64,
 "addition_time_embed_dim": 256, "attention_head_dim": [5, 10, 20],
 "block_out_channels": [320, 640, 1280], "center_input_sample": false,
 "class_embed_type": null, "class_embeddings_concat": false, "conv_in_kernel": 3,
 "conv_out_kernel": 3, "cross_attention_dim": 2048, "cross_attention_norm": null,
 "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
 "downsample_padding": 1, "dual_cross_attention": false, "encoder_hid_dim": null,
 "encoder_hid_dim_type": null, "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4,
 "layers_per_block": 2, "mid_block_only_cross_attention": null, "mid_block_scale_factor": 1,
 "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05, "norm_num_groups": 32,
 "num_attention_heads": null, "num_class_embeds": null, "only_cross_attention": false,
 "out_channels": 4, "projection_class_embeddings_input_dim": 2816,
 "resnet_out_scale_factor": 1.0, "resnet_skip_time_act": false,
 "resnet_time_scale_shift": "default", "sample_size": 128, "time_cond_proj_dim": null,
 "time_embedding_act_fn": null, "time_embedding_dim": null, "time_embedding_type": "positional",
 "timestep_post_act": null, "transformer_layers_per_block": [1, 2, 10],
 "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
 "upcast_attention": null, "use_linear_projection": true})"},
        {"sdxl-refiner", R"({"_class_name": "UNet2DConditionModel", "act_fn": "silu",
 "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
 "attention_head_dim": [6, 12, 24, 24], "block_out_channels": [384, 768, 1536, 1536],
 "cross_attention_dim": 1280,
 "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
 "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4, "layers_per_block": 2,
 "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05, "norm_num_groups": 32,
 "out_channels": 4, "projection_class_embeddings_input_dim": 2560, "sample_size": 128,
 "transformer_layers_per_block": 4,
 "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
 "use_linear_projection": true})"},
    };
    return kConfigs;
  }
};

}  // namespace

const Family& unet_2d_condition_family() {
  static const UnetFamily family;
  return family;
}

}  // namespace tp
