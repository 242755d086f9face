#include "harness/models/unet_2d_condition/euler_scheduler.h"

#include <algorithm>
#include <cmath>

namespace tp {
namespace {

// The scheduler's arithmetic runs in float32 on every path (Graph::fp32_arithmetic).
Graph scheduler_graph(GraphBuilder& b) {
  Graph g = b.finish();
  g.fp32_arithmetic = true;
  return g;
}

}  // namespace

EulerSchedule euler_schedule(int steps) {
  constexpr int kTrain = kTrainTimesteps;
  // torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, 1000, dtype=float32): Python's double roots
  // rounded to float32, a float32 step, from the start for the first half and from the end for
  // the second; squared in float32. alphas_cumprod: torch.cumprod on the CPU accumulates in
  // double and rounds each entry to float32. Sigmas: ((1 - a) / a) ** 0.5 in float32.
  const float start = float(std::sqrt(0.00085)), end = float(std::sqrt(0.012));
  const float step = (end - start) / float(kTrain - 1);
  std::vector<float> sigma_table(kTrain);
  double cumprod = 1;
  for (int i = 0; i < kTrain; ++i) {
    const float root =
        i < kTrain / 2 ? start + step * float(i) : end - step * float(kTrain - 1 - i);
    const float beta = root * root;
    cumprod *= double(1.0f - beta);
    const float alphas_cumprod = float(cumprod);
    sigma_table[std::size_t(i)] = std::sqrt((1.0f - alphas_cumprod) / alphas_cumprod);
  }
  EulerSchedule s;
  const int ratio = kTrain / steps;  // "leading": arange(n) * ratio, reversed, + steps_offset
  for (int i = steps - 1; i >= 0; --i) s.timesteps.push_back(float(i * ratio + 1));
  for (float t : s.timesteps) s.sigmas.push_back(sigma_table[std::size_t(t)]);  // whole t: exact
  s.sigmas.push_back(0.0f);
  const float max_sigma = *std::max_element(s.sigmas.begin(), s.sigmas.end());
  s.init_noise_sigma = std::sqrt(max_sigma * max_sigma + 1.0f);
  return s;
}

Graph build_euler_init_graph() {
  GraphBuilder b("euler.init");
  const int x = b.input("latents"), factor = b.input("factor");
  b.output("latents", b.binary("init_noise_sigma", BinaryOp::kMul, x, factor));
  return scheduler_graph(b);
}

Graph build_euler_scale_graph(int copies) {
  GraphBuilder b("euler.scale_model_input");
  int x = b.input("latents");
  const int divisor = b.input("divisor");
  if (copies > 1) x = b.concat("cfg_batch", std::vector<int>(std::size_t(copies), x), 0);
  b.output("sample", b.binary("scale_model_input", BinaryOp::kDiv, x, divisor));
  return scheduler_graph(b);
}

Graph build_euler_step_graph(bool guided) {
  GraphBuilder b(guided ? "euler.cfg_step" : "euler.step");
  const int x = b.input("latents");
  int eps = b.input("noise_pred");
  const int sigma = b.input("sigma"), dt = b.input("dt");
  if (guided) {
    const int g = b.input("guidance_scale");
    // noise_pred.chunk(2): [uncond; cond] along the batch. The halves are sliced by the batch of
    // `latents`, which the graph takes from the reshape below.
    const int both = b.reshape("noise_pred.halves", eps, {2, -1});
    const int uncond = b.reshape_like("noise_pred_uncond", b.slice("uncond", both, 0, 0, 1), x);
    const int cond = b.reshape_like("noise_pred_text", b.slice("cond", both, 0, 1, 2), x);
    const int diff = b.binary("guidance.diff", BinaryOp::kSub, cond, uncond);
    eps = b.binary("guidance", BinaryOp::kAdd, uncond,
                   b.binary("guidance.scaled", BinaryOp::kMul, g, diff));
  }
  const int pred_x0 = b.binary("pred_original_sample", BinaryOp::kSub, x,
                               b.binary("sigma_eps", BinaryOp::kMul, sigma, eps));
  const int derivative = b.binary("derivative", BinaryOp::kDiv,
                                  b.binary("x_minus_pred", BinaryOp::kSub, x, pred_x0), sigma);
  b.output("latents", b.binary("prev_sample", BinaryOp::kAdd, x,
                               b.binary("derivative_dt", BinaryOp::kMul, derivative, dt)));
  return scheduler_graph(b);
}

}  // namespace tp
