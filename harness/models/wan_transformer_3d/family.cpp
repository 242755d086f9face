#include "harness/models/wan_transformer_3d/family.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/core/rng.h"
#include "harness/models/wan_transformer_3d/flow_match.h"
#include "harness/models/wan_transformer_3d/wan_config.h"

namespace tp {
namespace {

// Image pixels per latent pixel (the Wan VAE's spatial downscale), so res= is the video's frame
// size as for the other denoisers.
constexpr int64_t kLatentScale = 8;
// Latent frames of a generated input when frames= is not given (9 video frames through the
// VAE's 4x temporal downscale).
constexpr int64_t kLatentFrames = 3;

// The case's frames= (canonical digits: the option's parser checked them), or the default.
int64_t latent_frames(const OptionValues& options) {
  const std::string v = given_option(options, "frames");
  int64_t n = kLatentFrames;
  if (!v.empty()) std::from_chars(v.data(), v.data() + v.size(), n);
  return n;
}
// Text tokens of a generated input: the prompt's kPromptTokens rows, then padding rows of exact
// zeros, as the pipeline pads UMT5's output (to 512 rows: dit-facts 4). Fewer padding rows than
// the pipeline's: the padding becomes one repeated key and value, whose rounding errors in the
// attention's sums share their sign, and 496 of them outgrow the random-sign sqrt(K) model of
// the fp32 tolerance (measured on tiny-wan: rel L2 3.7e-6 against its 2.9e-6).
constexpr int64_t kTextTokens = 24, kPromptTokens = 16;

const WanConfig& wan(const ModelConfig& c) { return dynamic_cast<const WanConfig&>(c); }

const char* const kInputs[] = {"hidden_states", "timestep", "encoder_hidden_states"};
const char* const kLoopInputs[] = {"latents", "prompt_embeds", "negative_prompt_embeds"};

std::vector<PipelineDescriptor> wan_pipelines() {
  PipelineDescriptor step = describe_pipeline(
      "wan.step",
      "one transformer call: hidden_states [B,C,F,H,W], timestep, encoder_hidden_states -> sample",
      {kInputs[0], kInputs[1], kInputs[2]}, {"sample"}, Produces::kNoisePrediction);
  step.options = {"frames"};
  PipelineDescriptor denoise = describe_pipeline(
      "wan.denoise",
      "WanPipeline's loop, flow-matching Euler with guidance: latents, prompt_embeds [, "
      "negative_prompt_embeds] -> latents",
      {kLoopInputs[0], kLoopInputs[1], kLoopInputs[2]}, {"latents"}, Produces::kLatents);
  denoise.options = {"steps", "guidance", "shift", "frames"};
  denoise.denoising = Denoising{};
  for (PipelineDescriptor* d : {&step, &denoise}) d->train_timesteps = 1000;
  return {step, denoise};
}

Tensor normal(const Shape& shape, uint64_t seed, const char* stream, double sigma) {
  Tensor t(DType::kF32, shape);
  Rng rng(seed, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.normal(sigma));
  return t;
}

class WanFamily : public Family {
 public:
  std::string class_name() const override { return "WanTransformer3DModel"; }

  Expected<std::shared_ptr<const ModelConfig>> parse_config(
      const nlohmann::json& config, const std::string& source) const override {
    TP_ASSIGN_OR_RETURN(WanConfig c, parse_wan_config(config, source));
    return std::shared_ptr<const ModelConfig>(std::make_shared<WanConfig>(std::move(c)));
  }

  std::vector<std::string> builtin_names() const override { return {"tiny-wan", "wan-1.3b"}; }
  const ConfigSpace* config_space() const override { return &wan_transformer_3d_config_space(); }
  std::string builtin_text(const std::string& name) const override {
    // tiny-wan: dit-facts 7, seconds on the CPU. wan-1.3b: Wan2.1-T2V-1.3B-Diffusers'
    // transformer/config.json as the conversion script writes it (dit-facts 1.2).
    if (name == "tiny-wan")
      return R"({"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": null,
 "attention_head_dim": 16, "cross_attn_norm": true, "eps": 1e-06, "ffn_dim": 64, "freq_dim": 32,
 "image_dim": null, "in_channels": 16, "num_attention_heads": 2, "num_layers": 2,
 "out_channels": 16, "patch_size": [1, 2, 2], "pos_embed_seq_len": null,
 "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 32, "text_dim": 32})";
    if (name == "wan-1.3b")
      return R"({"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": null,
 "attention_head_dim": 128, "cross_attn_norm": true, "eps": 1e-06, "ffn_dim": 8960,
 "freq_dim": 256, "image_dim": null, "in_channels": 16, "num_attention_heads": 12,
 "num_layers": 30, "out_channels": 16, "patch_size": [1, 2, 2], "qk_norm": "rms_norm_across_heads",
 "rope_max_seq_len": 1024, "text_dim": 4096})";
    return "";
  }

  // The transformer, and the scheduler's graphs wan.denoise runs beside it.
  std::vector<Graph> graphs(const ModelConfig& c) const override {
    return {build_wan_graph(wan(c)), build_flow_guidance_graph(), build_flow_step_graph()};
  }
  std::vector<ParamSpec> param_specs(const ModelConfig& c) const override {
    return wan_param_specs(wan(c));
  }

  const std::vector<PipelineDescriptor>& pipelines() const override {
    static const std::vector<PipelineDescriptor> kPipelines = wan_pipelines();
    return kPipelines;
  }
  const std::vector<PipelineOption>& options() const override { return wan_options(); }
  bool denoises(const std::string& name) const {
    const PipelineDescriptor* d = pipeline(name);
    return d && d->denoising;
  }

  Expected<Shape> input_shape(const ModelConfig& config, const std::string&, int64_t height,
                              int64_t width, const OptionValues& options) const override {
    if (height % kLatentScale || width % kLatentScale)
      return Error("res=" + std::to_string(height) + "x" + std::to_string(width) +
                   " is not a multiple of the VAE's 8x downscale, so it has no latent size; use "
                   "a multiple of 8");
    return Shape{1, wan(config).in_channels, latent_frames(options), height / kLatentScale,
                 width / kLatentScale};
  }
  int64_t input_scale(const ModelConfig&, const std::string&) const override {
    return kLatentScale;
  }

  Expected<Tensor> select_input(const std::string& pipeline, const NamedTensors& tensors,
                                const std::string& source) const override {
    const char* primary = denoises(pipeline) ? kLoopInputs[0] : kInputs[0];
    if (const Tensor* t = find_tensor(tensors, primary)) return *t;
    return Error(source + ": " + pipeline + " reads a tensor named '" + primary +
                 "' (the latents)");
  }
  Expected<NamedTensors> select_inputs(const std::string& pipeline, const NamedTensors& tensors,
                                       const std::string& source) const override {
    NamedTensors out;
    const bool loop = denoises(pipeline);
    for (const char* name : loop ? kLoopInputs : kInputs)
      if (const Tensor* t = find_tensor(tensors, name)) out.emplace_back(name, *t);
    if (out.empty())
      return Error(source + ": " + pipeline + " reads tensors named as diffusers' arguments (" +
                   (loop ? "latents, prompt_embeds, negative_prompt_embeds"
                         : "hidden_states, timestep, encoder_hidden_states") +
                   "); the file has none");
    return out;
  }

  Status check_input(const Model& model, const std::string& pipeline,
                     const Tensor& input) const override {
    return check_latents(wan(*model.config), pipeline, input);
  }

  // [B, in_channels, F, H, W], each of F, H, W at least its patch size, and the token grid
  // within the RoPE table diffusers makes (rope_max_seq_len positions per axis).
  static Status check_latents(const WanConfig& c, const std::string& pipeline, const Tensor& x) {
    if (x.rank() != 5 || x.dim(1) != c.in_channels || x.numel() == 0)
      return Error(pipeline + " takes hidden_states of shape [batch, " +
                   std::to_string(c.in_channels) + ", frames, height, width], but it is " +
                   shape_string(x.shape()));
    const char* axes[] = {"frames", "height", "width"};
    for (int i = 0; i < 3; ++i) {
      const int64_t size = x.dim(2 + i), patch = c.patch_size[std::size_t(i)];
      if (size < patch)
        return Error(pipeline + ": hidden_states has " + std::to_string(size) + " latent " +
                     axes[i] + ", fewer than the patch's " + std::to_string(patch) +
                     "; use a larger input");
      if (size / patch > c.rope_max_seq_len)
        return Error(pipeline + ": hidden_states has " + std::to_string(size / patch) + " " +
                     axes[i] + " patches, past the model's rope_max_seq_len " +
                     std::to_string(c.rope_max_seq_len) + "; use a smaller input");
    }
    return Status();
  }

  Expected<Tensor> generate_input(const Model& model, const InputRequest& r,
                                  const GraphRunner& reference) const override {
    TP_ASSIGN_OR_RETURN(NamedTensors all, generate_inputs(model, r, reference));
    return all.front().second;
  }
  // Seeded inputs of one call: latents ~ N(0, sigma^2), a flow-matching timestep (sigma * 1000,
  // a float in (0, 1000]), and the text padded as the pipeline pads it: the prompt's rows
  // ~ N(0, 1), the padding exact zeros.
  Expected<NamedTensors> generate_inputs(const Model& model, const InputRequest& r,
                                         const GraphRunner&) const override {
    if (r.image)
      return Error("input=image is a VAE's; a Wan case takes input=normal[*SIGMA] or a file");
    const WanConfig& c = wan(*model.config);
    TP_ASSIGN_OR_RETURN(Shape shape, input_shape(c, r.pipeline, r.height, r.width, r.options));
    auto padded_text = [&](const char* stream) {
      Tensor text(DType::kF32, {1, kTextTokens, c.text_dim});  // zeros
      const Tensor prompt = normal({1, kPromptTokens, c.text_dim}, r.seed, stream, 1);
      std::copy(prompt.data<float>(), prompt.data<float>() + prompt.numel(), text.data<float>());
      return text;
    };
    NamedTensors out;
    if (denoises(r.pipeline)) {  // the loop's noise, the prompt's and a negative prompt's text
      out.emplace_back(kLoopInputs[0], normal(shape, r.seed, "input", r.sigma));
      out.emplace_back(kLoopInputs[1], padded_text(kLoopInputs[1]));
      out.emplace_back(kLoopInputs[2], padded_text(kLoopInputs[2]));
      return out;
    }
    out.emplace_back(kInputs[0], normal(shape, r.seed, "input", r.sigma));
    Tensor t(DType::kF32, {1});
    Rng rng(r.seed, "timestep");
    t.data<float>()[0] = float(1000 * (1 - rng.uniform()));
    out.emplace_back(kInputs[1], t);
    out.emplace_back(kInputs[2], padded_text(kInputs[2]));
    return out;
  }

  Expected<NamedTensors> bind_inputs(const Model& model, const std::string& pipeline,
                                     const NamedTensors& inputs) const override {
    if (denoises(pipeline)) return inputs;  // run_wan_denoise checks them
    return bind(wan(*model.config), pipeline, inputs);
  }

  Expected<NamedTensors> run(const Model& model, const std::string& pipeline,
                             const NamedTensors& inputs, GraphExecutor& executor,
                             const PipelineOptions& options) const override {
    const WanConfig& c = wan(*model.config);
    if (denoises(pipeline)) return run_wan_denoise(model, c, inputs, executor, options);
    TP_ASSIGN_OR_RETURN(NamedTensors named, bind(c, pipeline, inputs));
    return executor.run(build_wan_graph(c), model.weights, named);
  }

  Expected<std::vector<Stage>> stages(const Model& model, const std::string& pipeline,
                                      const Shape& input) const override {
    if (denoises(pipeline))
      return Error(pipeline + " compiles its plans as its loop runs them (no stages ahead yet)");
    return std::vector<Stage>{{build_wan_graph(wan(*model.config)), input, ""}};
  }
  // The loop's calls by step, as diffusers counts them (from 0): step 3's transformer call and
  // scheduler graphs under "step3/", its unconditional call under "uncond/step3/" (the loop
  // runs it in that part).
  std::string call_scope(const std::string& pipeline, const std::string& graph,
                         int call) const override {
    if (!denoises(pipeline)) return Family::call_scope(pipeline, graph, call);
    return "step" + std::to_string(call) + "/";
  }

  // The inputs checked against the config, in the graph's order; a scalar timestep broadcast
  // to the batch (as the pipeline's t.expand(B)).
  static Expected<NamedTensors> bind(const WanConfig& c, const std::string& pipeline,
                                     const NamedTensors& inputs) {
    NamedTensors out;
    for (const char* name : kInputs) {
      const Tensor* t = find_tensor(inputs, name);
      if (!t)
        return Error(pipeline + " reads '" + name +
                     "', which the inputs do not hold; name the tensors as diffusers' "
                     "WanTransformer3DModel arguments: hidden_states, timestep, "
                     "encoder_hidden_states");
      out.emplace_back(name, t->to(t->dtype() == DType::kF64 ? DType::kF64 : DType::kF32));
    }
    TP_RETURN_IF_ERROR(check_latents(c, pipeline, out[0].second));
    const int64_t batch = out[0].second.dim(0);
    Tensor& timestep = out[1].second;
    if (timestep.numel() == 1 && batch > 1) {
      const Tensor one = timestep.to(DType::kF64);
      Tensor filled(DType::kF64, {batch});
      for (int64_t i = 0; i < batch; ++i) filled.data<double>()[i] = one.data<double>()[0];
      timestep = filled.to(timestep.dtype());
    } else if (timestep.numel() != batch) {
      return Error(pipeline + " takes a timestep that is a scalar or [" + std::to_string(batch) +
                   "], not " + shape_string(timestep.shape()));
    }
    timestep = std::move(timestep).reshaped({batch});
    const Tensor& text = out[2].second;
    if (text.rank() != 3 || text.dim(0) != batch || text.dim(2) != c.text_dim || text.dim(1) < 1)
      return Error(pipeline + " takes encoder_hidden_states of shape [" + std::to_string(batch) +
                   ", tokens, " + std::to_string(c.text_dim) + "], not " +
                   shape_string(text.shape()));
    return out;
  }
};

}  // namespace

const Family& WanConfig::family() const { return wan_transformer_3d_family(); }

const Family& wan_transformer_3d_family() {
  static const WanFamily family;
  return family;
}

}  // namespace tp
