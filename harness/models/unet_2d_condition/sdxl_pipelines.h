// The SDXL denoising loop (StableDiffusionXLPipeline with output_type="latent", unet-facts 9.2):
// the Euler scheduler's steps, classifier-free guidance with [negative, positive] batches, and
// add_time_ids from the resolution, each step's arithmetic as graphs on the same executor as
// the UNet, so every path runs the whole loop.
#pragma once

#include "harness/models/unet_2d_condition/unet_config.h"

namespace tp {

// Inputs (diffusers' argument names): latents [B,4,h,w] (the pipeline's `latents`: initial
// noise, scaled here by init_noise_sigma as diffusers does), prompt_embeds [B,L,D],
// pooled_prompt_embeds [B,P], and with guidance > 1 negative_prompt_embeds and
// negative_pooled_prompt_embeds. Output "latents".
Expected<NamedTensors> run_sdxl_denoise(const Model& model, const UnetConfig& config,
                                        const NamedTensors& inputs, GraphExecutor& executor,
                                        const PipelineOptions& options);

}  // namespace tp
