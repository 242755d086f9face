// The SDXL denoising loop (StableDiffusionXLPipeline with output_type="latent", unet-facts 9.2):
// the Euler scheduler's steps, classifier-free guidance with [negative, positive] batches, and
// add_time_ids from the resolution, each step's arithmetic as graphs on the same executor as
// the UNet, so every path runs the whole loop.
#pragma once

#include "harness/models/unet_2d_condition/unet_config.h"

namespace tp {

// The SDXL pipelines' options, as a case line and exec, triage and tradeoff take them: vae=,
// refiner=, split=, steps=, guidance=, with diffusers' defaults (the one place they are written).
const std::vector<PipelineOption>& sdxl_options();

// A run's values of them (PipelineOptions' as given, else the defaults above).
struct SdxlOptions {
  int steps = 0;
  double guidance_scale = 0;   // classifier-free guidance, off at <= 1 (as diffusers)
  double denoising_split = 0;  // the base's denoising_end, the refiner's denoising_start
  const Model* vae = nullptr;  // text-to-image pipelines: the VAE that decodes (not owned)
  const Model* refiner = nullptr;
  PipelineOptions run;  // the run's own (the tiling the VAE's decode takes)
};
SdxlOptions sdxl_loop_options(const Family& family, const PipelineOptions& options);

// The part of a base + refiner run the refiner's calls belong to (GraphExecutor::set_part).
inline constexpr const char* kRefinerPart = "refiner/";

// Inputs (diffusers' argument names): latents [B,4,h,w] (the pipeline's `latents`: initial
// noise, scaled here by init_noise_sigma as diffusers does), prompt_embeds [B,L,D],
// pooled_prompt_embeds [B,P], and with guidance > 1 negative_prompt_embeds and
// negative_pooled_prompt_embeds. Output "latents".
// sdxl.txt2img: the denoising loop, then the latents divided by the VAE's scaling_factor and
// decoded by options.vae (StableDiffusionXLPipeline with output_type "pil" before the
// postprocessing: the image in [-1, 1]).
Expected<NamedTensors> run_sdxl_txt2img(const Model& model, const UnetConfig& config,
                                        const NamedTensors& inputs, GraphExecutor& executor,
                                        const SdxlOptions& options);
Graph build_unscale_latents_graph();

// sdxl.refine: the refiner's loop (StableDiffusionXLImg2ImgPipeline with denoising_start =
// options.denoising_split) on `latents` as given (the base's, no noise added), reading
// prompt_embeds and pooled_prompt_embeds (and negatives) for the refiner; time ids with the
// aesthetic scores 6 and 2.5. Output "latents".
Expected<NamedTensors> run_sdxl_refine(const Model& model, const UnetConfig& config,
                                       const NamedTensors& inputs, GraphExecutor& executor,
                                       const SdxlOptions& options);
// sdxl.base+refiner: the base to denoising_end, its latents decoded by the shared VAE
// ("base.sample", "base.latents"), then options.refiner from denoising_start on the same
// prompt (the last columns of prompt_embeds: its text_encoder_2 part), decoded by the same VAE
// ("sample"). The refiner's calls are named under "refiner/".
Expected<NamedTensors> run_sdxl_base_refiner(const Model& model, const UnetConfig& config,
                                             const NamedTensors& inputs, GraphExecutor& executor,
                                             const SdxlOptions& options);
// How many of the schedule's steps the base runs before the refiner takes over at `fraction`
// (diffusers' cutoff round(1000 - fraction * 1000): the base keeps timesteps >= it).
struct EulerSchedule;
int split_step(const EulerSchedule& schedule, double fraction);

Expected<NamedTensors> run_sdxl_denoise(const Model& model, const UnetConfig& config,
                                        const NamedTensors& inputs, GraphExecutor& executor,
                                        const SdxlOptions& options);

}  // namespace tp
