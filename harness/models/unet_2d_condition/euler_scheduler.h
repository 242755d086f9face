// diffusers' EulerDiscreteScheduler as SDXL configures it (scaled_linear betas 0.00085..0.012
// over 1000 steps, "leading" spacing with steps_offset 1, epsilon prediction, linear sigma
// interpolation, a final sigma of 0; unet-facts 8), with the tables computed in float32 as
// diffusers computes them. The per-step arithmetic (input scaling, guidance, the Euler step) is
// graphs (euler_graphs), so every path runs it and the compiled path's kernels are checked on it.
#pragma once

#include <vector>

#include "harness/core/graph.h"

namespace tp {

// The timesteps SDXL's scheduler was trained on (num_train_timesteps).
inline constexpr int kTrainTimesteps = 1000;

struct EulerSchedule {
  std::vector<float> timesteps;  // n, descending
  std::vector<float> sigmas;     // n + 1, the last 0
  float init_noise_sigma = 0;    // sqrt(max sigma^2 + 1) ("leading")
};

// set_timesteps(steps); steps in [1, 1000].
EulerSchedule euler_schedule(int steps);

// x * init_noise_sigma: inputs "latents", "factor" [1]; output "latents".
Graph build_euler_init_graph();
// scale_model_input of cat([x] * copies): inputs "latents", "divisor" [1] (sqrt(sigma^2 + 1));
// output "sample".
Graph build_euler_scale_graph(int copies);
// Classifier-free guidance (when `guided`: noise_pred = [uncond; cond] halves, uncond +
// guidance * (cond - uncond)) and the Euler step, as diffusers orders it: pred_x0 = x - sigma *
// eps, derivative = (x - pred_x0) / sigma, x + derivative * dt. Inputs "latents", "noise_pred",
// "sigma" [1], "dt" [1] (and "guidance_scale" [1]); output "latents".
Graph build_euler_step_graph(bool guided);

}  // namespace tp
