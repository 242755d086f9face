#include "harness/models/unet_2d_condition/sdxl_pipelines.h"

#include <algorithm>
#include <cmath>

#include "harness/models/option_parsers.h"
#include "harness/models/unet_2d_condition/euler_scheduler.h"

namespace tp {
namespace {

Tensor scalar(float v) {
  Tensor t(DType::kF32, {1});
  t.data<float>()[0] = v;
  return t;
}

// Rows of `a` then rows of `b` (torch.cat along the batch), in f32.
Tensor cat_batch(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::kF32), y = b.to(DType::kF32);
  Shape shape = x.shape();
  shape[0] += y.dim(0);
  Tensor out(DType::kF32, shape);
  std::copy(x.data<float>(), x.data<float>() + x.numel(), out.data<float>());
  std::copy(y.data<float>(), y.data<float>() + y.numel(), out.data<float>() + x.numel());
  return out;
}

// The last `n` columns of a [B, L, D] tensor: the refiner's text_encoder_2 part of the base's
// prompt_embeds (CLIP-L's 768 columns, then OpenCLIP-bigG's 1280).
Tensor last_columns(const Tensor& t, int64_t n) {
  const Tensor x = t.to(DType::kF32);
  const int64_t rows = x.numel() / x.dim(2), d = x.dim(2);
  Tensor out(DType::kF32, {x.dim(0), x.dim(1), n});
  for (int64_t r = 0; r < rows; ++r)
    std::copy(x.data<float>() + r * d + (d - n), x.data<float>() + (r + 1) * d,
              out.data<float>() + r * n);
  return out;
}

Expected<Tensor> named(const NamedTensors& inputs, const std::string& name,
                       const std::string& pipeline, const std::string& why) {
  if (const Tensor* t = find_tensor(inputs, name)) return *t;
  return Error(pipeline + " reads '" + name + "' (" + why + "), which the inputs do not hold");
}

const Tensor& only(const NamedTensors& outputs) { return outputs.front().second; }

// What every step of one UNet's loop reads besides the latents.
struct Conditioning {
  Tensor context, text, time_ids;
  bool guided = false;
  int64_t rows = 0;  // the UNet's batch: twice the latents' under guidance
};

// The pipeline's text conditioning for `c`, with [negative, positive] batches under guidance,
// and add_time_ids from the image size: the base's (original = target size, crops 0), or with
// `aesthetic` the refiner's (original size, crops 0, aesthetic score 6; 2.5 for the negative).
// `columns` > 0 takes the last columns of the prompt embeddings (the refiner's part of the
// base's). The image is the latents x `scale` pixels.
Expected<Conditioning> conditioning(const UnetConfig& c, const std::string& pipeline,
                                    const NamedTensors& inputs, const Tensor& latents,
                                    const SdxlOptions& options, bool aesthetic, int64_t columns,
                                    int64_t scale) {
  Conditioning k;
  k.guided = options.guidance_scale > 1;
  TP_ASSIGN_OR_RETURN(Tensor prompt,
                      named(inputs, "prompt_embeds", pipeline, "the text conditioning"));
  TP_ASSIGN_OR_RETURN(Tensor pooled,
                      named(inputs, "pooled_prompt_embeds", pipeline, "the pooled text embedding"));
  Tensor negative, negative_pooled;
  if (k.guided) {
    TP_ASSIGN_OR_RETURN(negative, named(inputs, "negative_prompt_embeds", pipeline,
                                        "guidance > 1 needs the negative prompt"));
    TP_ASSIGN_OR_RETURN(negative_pooled, named(inputs, "negative_pooled_prompt_embeds", pipeline,
                                               "guidance > 1 needs the negative pooled embedding"));
    if (negative.shape() != prompt.shape() || negative_pooled.shape() != pooled.shape())
      return Error(pipeline + ": the negative embeddings' shapes " +
                   shape_string(negative.shape()) + ", " + shape_string(negative_pooled.shape()) +
                   " differ from the prompt's " + shape_string(prompt.shape()) + ", " +
                   shape_string(pooled.shape()));
  }
  const int64_t batch = latents.dim(0), n_ids = aesthetic ? 5 : 6;
  const int64_t dim = c.cross_attention_dim[0];
  const int64_t text_dim =
      c.projection_class_embeddings_input_dim - n_ids * c.addition_time_embed_dim;
  if (prompt.rank() != 3 || prompt.dim(0) != batch || prompt.dim(2) < (columns ? columns : dim) ||
      (!columns && prompt.dim(2) != dim))
    return Error(pipeline + " takes prompt_embeds of shape [" + std::to_string(batch) +
                 ", tokens, " + std::to_string(dim) + "], not " + shape_string(prompt.shape()));
  if (pooled.rank() != 2 || pooled.dim(0) != batch || pooled.dim(1) != text_dim)
    return Error(pipeline + " takes pooled_prompt_embeds of shape [" + std::to_string(batch) +
                 ", " + std::to_string(text_dim) + "] (the UNet's projection input less " +
                 std::to_string(n_ids) + " time ids), not " + shape_string(pooled.shape()));
  if (columns) {
    prompt = last_columns(prompt, columns);
    if (k.guided) negative = last_columns(negative, columns);
  }
  k.context = k.guided ? cat_batch(negative, prompt) : prompt.to(DType::kF32);
  k.text = k.guided ? cat_batch(negative_pooled, pooled) : pooled.to(DType::kF32);
  k.rows = k.guided ? 2 * batch : batch;
  const float h = float(latents.dim(2) * scale), w = float(latents.dim(3) * scale);
  const std::vector<float> positive =
      aesthetic ? std::vector<float>{h, w, 0, 0, 6.0f} : std::vector<float>{h, w, 0, 0, h, w};
  std::vector<float> negative_ids = positive;
  if (aesthetic) negative_ids.back() = 2.5f;
  k.time_ids = Tensor(DType::kF32, {k.rows, n_ids});
  for (int64_t r = 0; r < k.rows; ++r) {
    const std::vector<float>& ids = k.guided && r < batch ? negative_ids : positive;
    std::copy(ids.begin(), ids.end(), k.time_ids.data<float>() + r * n_ids);
  }
  return k;
}

// Steps [first, last) of `schedule` on `x` (the scheduler's latents), as the pipelines' loop.
Expected<Tensor> denoise_steps(const Model& model, const UnetConfig& c, Tensor x,
                               const Conditioning& k, const EulerSchedule& schedule, int first,
                               int last, GraphExecutor& executor, const SdxlOptions& options) {
  // The scheduler's graphs read no parameters; they run with the model's weights all the same,
  // so their plans carry the model's identity (a plan file holds them with the UNet's).
  const Weights& weights = model.weights;
  const Graph unet = build_unet_graph(c), scale = build_euler_scale_graph(k.guided ? 2 : 1),
              step = build_euler_step_graph(k.guided);
  for (int i = first; i < last; ++i) {
    const float sigma = schedule.sigmas[std::size_t(i)], next = schedule.sigmas[std::size_t(i) + 1];
    TP_ASSIGN_OR_RETURN(
        NamedTensors sample,
        executor.run(scale, weights,
                     {{"latents", x}, {"divisor", scalar(std::sqrt(sigma * sigma + 1.0f))}}));
    Tensor t(DType::kF32, {k.rows});
    std::fill(t.data<float>(), t.data<float>() + k.rows, schedule.timesteps[std::size_t(i)]);
    TP_ASSIGN_OR_RETURN(NamedTensors eps, executor.run(unet, weights,
                                                       {{"sample", only(sample)},
                                                        {"timestep", t},
                                                        {"encoder_hidden_states", k.context},
                                                        {"text_embeds", k.text},
                                                        {"time_ids", k.time_ids}}));
    NamedTensors step_inputs{{"latents", x},
                             {"noise_pred", only(eps)},
                             {"sigma", scalar(sigma)},
                             {"dt", scalar(next - sigma)}};
    if (k.guided) step_inputs.emplace_back("guidance_scale", scalar(float(options.guidance_scale)));
    TP_ASSIGN_OR_RETURN(NamedTensors stepped, executor.run(step, weights, step_inputs));
    x = only(stepped);
  }
  return x;
}

Status check_loop(const UnetConfig& c, const std::string& pipeline, const Tensor& latents,
                  const SdxlOptions& options) {
  if (!c.text_time)
    return Error(pipeline + " runs SDXL UNets (addition_embed_type text_time); this UNet has none");
  if (options.steps < 1 || options.steps > 1000)
    return Error(pipeline + " takes 1 to 1000 steps, not " + std::to_string(options.steps));
  if (latents.rank() != 4 || latents.dim(1) != c.in_channels)
    return Error(pipeline + " takes latents [batch, " + std::to_string(c.in_channels) +
                 ", height/8, width/8], not " + shape_string(latents.shape()));
  return Status();
}

// The base's loop from noise: latents * init_noise_sigma, then steps [0, last).
Expected<Tensor> base_loop(const Model& model, const UnetConfig& c, const std::string& pipeline,
                           const NamedTensors& inputs, GraphExecutor& executor,
                           const SdxlOptions& options, const EulerSchedule& schedule, int last) {
  TP_ASSIGN_OR_RETURN(Tensor latents, named(inputs, "latents", pipeline, "the initial noise"));
  TP_RETURN_IF_ERROR(check_loop(c, pipeline, latents, options));
  TP_ASSIGN_OR_RETURN(Conditioning k,
                      conditioning(c, pipeline, inputs, latents, options, false, 0, 8));
  TP_ASSIGN_OR_RETURN(NamedTensors x,
                      executor.run(build_euler_init_graph(), model.weights,
                                   {{"latents", latents.to(DType::kF32)},
                                    {"factor", scalar(schedule.init_noise_sigma)}}));
  return denoise_steps(model, c, only(x), k, schedule, 0, last, executor, options);
}

// The refiner's loop from `latents` as given (no noise, no scaling: denoising_start), over the
// schedule's steps from `first`; `columns` as conditioning's. Its time ids take the image size
// as StableDiffusionXLImg2ImgPipeline does: the latents times the VAE's scale factor (8 when
// there is no VAE, as for SDXL's).
Expected<Tensor> refiner_loop(const Model& model, const UnetConfig& c, const std::string& pipeline,
                              const NamedTensors& inputs, const Tensor& latents,
                              GraphExecutor& executor, const SdxlOptions& options,
                              const EulerSchedule& schedule, int first, int64_t columns) {
  TP_RETURN_IF_ERROR(check_loop(c, pipeline, latents, options));
  const int64_t scale =
      options.vae ? options.vae->family().input_scale(*options.vae->config, "vae.decode") : 8;
  TP_ASSIGN_OR_RETURN(Conditioning k,
                      conditioning(c, pipeline, inputs, latents, options, true, columns, scale));
  return denoise_steps(model, c, latents.to(DType::kF32), k, schedule, first,
                       int(schedule.timesteps.size()), executor, options);
}

Status check_fraction(const std::string& pipeline, double f) {
  if (!(f > 0 && f < 1))
    return Error(pipeline +
                 " splits the schedule at a fraction between 0 and 1 (denoising_start / "
                 "denoising_end), not " +
                 std::to_string(f));
  return Status();
}

// Divides by the VAE's scaling_factor and decodes (StableDiffusionXLPipeline's last stage).
Expected<NamedTensors> decode(const Model& vae, const Tensor& latents, GraphExecutor& executor,
                              const SdxlOptions& options) {
  TP_RETURN_IF_ERROR(vae.family().check_input(vae, "vae.decode", latents));
  TP_ASSIGN_OR_RETURN(
      NamedTensors unscaled,
      executor.run(build_unscale_latents_graph(), vae.weights,
                   {{"latents", latents},
                    {"scaling_factor", scalar(float(*vae.config->scaling_factor()))}}));
  PipelineOptions plain = options.run;
  plain.values.clear();
  plain.models.clear();
  return run_model(vae, "vae.decode", only(unscaled), executor, plain);
}

Status check_vae(const std::string& pipeline, const Model* vae) {
  if (!vae || !vae->family().runs("vae.decode") || !vae->config->scaling_factor())
    return Error(pipeline + " decodes the latents with a VAE" +
                 (vae ? "; " + vae->dir + " has no vae.decode" : "") +
                 ": give it one (a case's vae=MODEL, exec's --vae DIR; built-ins: sdxl-kl, "
                 "tiny-kl)");
  return Status();
}

}  // namespace

const std::vector<PipelineOption>& sdxl_options() {
  static const std::vector<PipelineOption> kOptions = {
      {"vae", "vae", "vae=MODEL", "",
       "the VAE that decodes the latents: a built-in (tiny-kl, sdxl-kl) or a diffusers VAE "
       "folder (diffusers' vae/)",
       model_option()},
      {"refiner", "refiner", "refiner=MODEL", "",
       "the refiner UNet: a built-in (tiny-unet-xl-refiner, sdxl-refiner) or a diffusers UNet "
       "folder (the refiner's unet/)",
       model_option()},
      {"split", "denoising-split", "split=F", "0.8",
       "the fraction of the schedule before the refiner (the base's denoising_end, the "
       "refiner's denoising_start)",
       number_option([](double f) { return f > 0 && f < 1; },
                     "expected split=F with F between 0 and 1, e.g. split=0.8")},
      steps_option(50),
      guidance_option(5),
  };
  return kOptions;
}

SdxlOptions sdxl_loop_options(const Family& family, const PipelineOptions& options) {
  SdxlOptions o;
  o.steps = int(option_number(family, options, "steps"));
  o.guidance_scale = option_number(family, options, "guidance");
  o.denoising_split = option_number(family, options, "split");
  o.vae = options.model("vae");
  o.refiner = options.model("refiner");
  o.run = options;
  return o;
}

int split_step(const EulerSchedule& schedule, double fraction) {
  const int cutoff = int(std::lround(1000 - fraction * 1000));
  int n = 0;  // steps the base keeps: timesteps >= cutoff
  for (float t : schedule.timesteps) n += t >= float(cutoff);
  return n;
}

Graph build_unscale_latents_graph() {
  GraphBuilder b("sdxl.unscale_latents");
  const int x = b.input("latents"), factor = b.input("scaling_factor");
  b.output("latents", b.binary("unscale_latents", BinaryOp::kDiv, x, factor));
  Graph g = b.finish();
  g.fp32_arithmetic = true;  // one division: the same bits as diffusers' in the latents' dtype
  return g;
}

Expected<NamedTensors> run_sdxl_denoise(const Model& model, const UnetConfig& c,
                                        const NamedTensors& inputs, GraphExecutor& executor,
                                        const SdxlOptions& options) {
  const EulerSchedule schedule = euler_schedule(options.steps);
  TP_ASSIGN_OR_RETURN(Tensor x, base_loop(model, c, "sdxl.denoise", inputs, executor, options,
                                          schedule, int(schedule.timesteps.size())));
  return NamedTensors{{"latents", x}};
}

Expected<NamedTensors> run_sdxl_txt2img(const Model& model, const UnetConfig& c,
                                        const NamedTensors& inputs, GraphExecutor& executor,
                                        const SdxlOptions& options) {
  TP_RETURN_IF_ERROR(check_vae("sdxl.txt2img", options.vae));
  const EulerSchedule schedule = euler_schedule(options.steps);
  TP_ASSIGN_OR_RETURN(Tensor x, base_loop(model, c, "sdxl.txt2img", inputs, executor, options,
                                          schedule, int(schedule.timesteps.size())));
  return decode(*options.vae, x, executor, options);
}

Expected<NamedTensors> run_sdxl_refine(const Model& model, const UnetConfig& c,
                                       const NamedTensors& inputs, GraphExecutor& executor,
                                       const SdxlOptions& options) {
  TP_RETURN_IF_ERROR(check_fraction("sdxl.refine", options.denoising_split));
  TP_ASSIGN_OR_RETURN(Tensor latents,
                      named(inputs, "latents", "sdxl.refine", "the base's latents"));
  const EulerSchedule schedule = euler_schedule(options.steps);
  const int first = split_step(schedule, options.denoising_split);
  TP_ASSIGN_OR_RETURN(Tensor x, refiner_loop(model, c, "sdxl.refine", inputs, latents, executor,
                                             options, schedule, first, 0));
  return NamedTensors{{"latents", x}};
}

Expected<NamedTensors> run_sdxl_base_refiner(const Model& model, const UnetConfig& c,
                                             const NamedTensors& inputs, GraphExecutor& executor,
                                             const SdxlOptions& options) {
  const std::string pipeline = "sdxl.base+refiner";
  TP_RETURN_IF_ERROR(check_vae(pipeline, options.vae));
  TP_RETURN_IF_ERROR(check_fraction(pipeline, options.denoising_split));
  const Model* refiner = options.refiner;
  if (!refiner || refiner->family().class_name() != model.family().class_name())
    return Error(pipeline +
                 " hands the base's latents to a refiner UNet: give it one (a case's "
                 "refiner=MODEL, exec's --refiner DIR; built-ins: tiny-unet-xl-refiner, "
                 "sdxl-refiner)");
  const auto& rc = dynamic_cast<const UnetConfig&>(*refiner->config);
  const EulerSchedule schedule = euler_schedule(options.steps);
  const int split = split_step(schedule, options.denoising_split);
  // The base with denoising_end: its latents as output_type="latent" returns them, decoded as
  // the base pipeline alone would ("base.sample") by the VAE both pipelines share.
  TP_ASSIGN_OR_RETURN(Tensor base,
                      base_loop(model, c, pipeline, inputs, executor, options, schedule, split));
  TP_ASSIGN_OR_RETURN(NamedTensors base_image, decode(*options.vae, base, executor, options));
  // The refiner with denoising_start from the same step, conditioned on the same prompt: its
  // text_encoder_2 part of prompt_embeds and the same pooled embedding.
  struct RefinerPart {  // the refiner's calls, named apart until the pipeline returns
    GraphExecutor& executor;
    explicit RefinerPart(GraphExecutor& e) : executor(e) { executor.set_part(kRefinerPart); }
    ~RefinerPart() { executor.set_part(""); }
  } part(executor);
  TP_ASSIGN_OR_RETURN(Tensor refined,
                      refiner_loop(*refiner, rc, pipeline, inputs, base, executor, options,
                                   schedule, split, rc.cross_attention_dim[0]));
  TP_ASSIGN_OR_RETURN(NamedTensors out, decode(*options.vae, refined, executor, options));
  for (auto& [name, t] : base_image) out.emplace_back("base." + name, std::move(t));
  out.emplace_back("base.latents", base);
  return out;
}

}  // namespace tp
