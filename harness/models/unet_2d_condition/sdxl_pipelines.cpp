#include "harness/models/unet_2d_condition/sdxl_pipelines.h"

#include <cmath>

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

Expected<Tensor> named(const NamedTensors& inputs, const std::string& name,
                       const std::string& why) {
  if (const Tensor* t = find_tensor(inputs, name)) return *t;
  return Error("sdxl.denoise reads '" + name + "' (" + why + "), which the inputs do not hold");
}

const Tensor& only(const NamedTensors& outputs) { return outputs.front().second; }

}  // namespace

Expected<NamedTensors> run_sdxl_denoise(const Model& model, const UnetConfig& c,
                                        const NamedTensors& inputs, GraphExecutor& executor,
                                        const PipelineOptions& options) {
  if (!c.text_time)
    return Error(
        "sdxl.denoise runs SDXL UNets (addition_embed_type text_time); this UNet has none");
  if (options.steps < 1 || options.steps > 1000)
    return Error("sdxl.denoise takes 1 to 1000 steps, not " + std::to_string(options.steps));
  const bool guided = options.guidance_scale > 1;
  TP_ASSIGN_OR_RETURN(Tensor latents, named(inputs, "latents", "the initial noise"));
  TP_ASSIGN_OR_RETURN(Tensor prompt, named(inputs, "prompt_embeds", "the text conditioning"));
  TP_ASSIGN_OR_RETURN(Tensor pooled,
                      named(inputs, "pooled_prompt_embeds", "the pooled text embedding"));
  if (latents.rank() != 4 || latents.dim(1) != c.in_channels)
    return Error("sdxl.denoise takes latents [batch, " + std::to_string(c.in_channels) +
                 ", height/8, width/8], not " + shape_string(latents.shape()));
  const int64_t batch = latents.dim(0);
  Tensor context = prompt.to(DType::kF32), text = pooled.to(DType::kF32);
  if (guided) {
    TP_ASSIGN_OR_RETURN(Tensor negative, named(inputs, "negative_prompt_embeds",
                                               "guidance > 1 needs the negative prompt"));
    TP_ASSIGN_OR_RETURN(Tensor negative_pooled,
                        named(inputs, "negative_pooled_prompt_embeds",
                              "guidance > 1 needs the negative pooled embedding"));
    if (negative.shape() != prompt.shape() || negative_pooled.shape() != pooled.shape())
      return Error("sdxl.denoise: the negative embeddings' shapes " +
                   shape_string(negative.shape()) + ", " + shape_string(negative_pooled.shape()) +
                   " differ from the prompt's " + shape_string(prompt.shape()) + ", " +
                   shape_string(pooled.shape()));
    context = cat_batch(negative, prompt);  // [negative, positive], as the pipeline batches
    text = cat_batch(negative_pooled, pooled);
  }
  const int64_t rows = guided ? 2 * batch : batch;
  // add_time_ids: original size = target size = the image's (latents x 8), crops (0, 0).
  const float h = float(latents.dim(2) * 8), w = float(latents.dim(3) * 8);
  const int64_t n_ids = 6;
  Tensor time_ids(DType::kF32, {rows, n_ids});
  for (int64_t r = 0; r < rows; ++r) {
    const float ids[] = {h, w, 0, 0, h, w};
    std::copy(ids, ids + n_ids, time_ids.data<float>() + r * n_ids);
  }
  const EulerSchedule schedule = euler_schedule(options.steps);
  static const Weights kNoWeights;  // the scheduler's graphs have no parameters
  const Graph unet = build_unet_graph(c), init = build_euler_init_graph(),
              scale = build_euler_scale_graph(guided ? 2 : 1),
              step = build_euler_step_graph(guided);
  TP_ASSIGN_OR_RETURN(NamedTensors x,
                      executor.run(init, kNoWeights,
                                   {{"latents", latents.to(DType::kF32)},
                                    {"factor", scalar(schedule.init_noise_sigma)}}));
  for (std::size_t i = 0; i < schedule.timesteps.size(); ++i) {
    const float sigma = schedule.sigmas[i], next = schedule.sigmas[i + 1];
    TP_ASSIGN_OR_RETURN(
        NamedTensors sample,
        executor.run(scale, kNoWeights,
                     {{"latents", only(x)}, {"divisor", scalar(std::sqrt(sigma * sigma + 1.0f))}}));
    Tensor t(DType::kF32, {rows});
    std::fill(t.data<float>(), t.data<float>() + rows, schedule.timesteps[i]);
    TP_ASSIGN_OR_RETURN(NamedTensors eps, executor.run(unet, model.weights,
                                                       {{"sample", only(sample)},
                                                        {"timestep", t},
                                                        {"encoder_hidden_states", context},
                                                        {"text_embeds", text},
                                                        {"time_ids", time_ids}}));
    NamedTensors step_inputs{{"latents", only(x)},
                             {"noise_pred", only(eps)},
                             {"sigma", scalar(sigma)},
                             {"dt", scalar(next - sigma)}};
    if (guided) step_inputs.emplace_back("guidance_scale", scalar(float(options.guidance_scale)));
    TP_ASSIGN_OR_RETURN(x, executor.run(step, kNoWeights, step_inputs));
  }
  return NamedTensors{{"latents", only(x)}};
}

}  // namespace tp
