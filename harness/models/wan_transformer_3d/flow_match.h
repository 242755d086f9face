// WanPipeline's denoising loop with FlowMatchEulerDiscreteScheduler (dit-facts 9): the schedule
// as diffusers 0.42.1 computes it (float32 training sigmas shifted, a float64 linspace between
// their ends shifted again, float32 sigmas and timesteps), classifier-free guidance in the
// transformer's dtype, and the Euler step in float32, each step's arithmetic as graphs so every
// path runs the whole loop.
#pragma once

#include <vector>

#include "harness/models/wan_transformer_3d/wan_config.h"

namespace tp {

struct FlowSchedule {
  std::vector<float> sigmas;     // steps + 1, the last 0
  std::vector<float> timesteps;  // steps: sigma * 1000, what the transformer reads
};
FlowSchedule flow_match_schedule(int steps, double shift);

// "flow.guidance": noise_uncond + guidance_scale * (noise_pred - noise_uncond), in the
// activation dtype as the pipeline computes it. "flow.step": latents + dt * noise_pred in
// float32 (Graph::fp32_arithmetic), the result stored in the model output's dtype.
Graph build_flow_guidance_graph();
Graph build_flow_step_graph();

// The family's options for wan.denoise: steps=, guidance=, shift=, with WanPipeline's defaults.
const std::vector<PipelineOption>& wan_options();

// wan.denoise: latents [B,C,F,H,W] (the pipeline's initial noise), prompt_embeds [B,L,text_dim]
// and, with guidance > 1, negative_prompt_embeds; output "latents".
Expected<NamedTensors> run_wan_denoise(const Model& model, const WanConfig& config,
                                       const NamedTensors& inputs, GraphExecutor& executor,
                                       const PipelineOptions& options);

}  // namespace tp
