// EulerDiscreteScheduler as SDXL configures it: the tables against diffusers' measured numbers
// (unet-facts 8.4; float32, 8 significant digits), and the per-step graphs against the formulas.
#include "harness/models/unet_2d_condition/euler_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reference/executor.h"

namespace tp {
namespace {

// Within a few float32 ulps: diffusers' betas come from torch.linspace, whose float32 values
// the schedule does not yet reproduce bit for bit (145 of the 1000 differ, at the ulp level).
void expect_near_f32(double got, double want) { EXPECT_NEAR(got, want, 4e-7 * std::fabs(want)); }

TEST(EulerScheduler, TablesMatchDiffusersSdxlConfig) {
  const EulerSchedule three = euler_schedule(3);
  ASSERT_EQ(three.timesteps, (std::vector<float>{667, 334, 1}));
  const double sigmas3[] = {2.9295499, 0.93551022, 0.041314479, 0};
  ASSERT_EQ(three.sigmas.size(), 4u);
  for (int i = 0; i < 4; ++i) expect_near_f32(three.sigmas[std::size_t(i)], sigmas3[i]);
  expect_near_f32(three.init_noise_sigma, 3.0955231);
  const EulerSchedule four = euler_schedule(4);
  ASSERT_EQ(four.timesteps, (std::vector<float>{751, 501, 251, 1}));
  const double sigmas4[] = {4.1166983, 1.623693, 0.69839859, 0.041314479, 0};
  for (int i = 0; i < 5; ++i) expect_near_f32(four.sigmas[std::size_t(i)], sigmas4[i]);
  expect_near_f32(four.init_noise_sigma, 4.236414);
  const EulerSchedule thirty = euler_schedule(30);
  EXPECT_EQ(thirty.timesteps.front(), 958);
  EXPECT_EQ(thirty.timesteps.back(), 1);
  expect_near_f32(thirty.sigmas.front(), 11.476851);
  expect_near_f32(thirty.init_noise_sigma, 11.520334);
}

Tensor filled(const Shape& shape, double first, double step) {
  Tensor t(DType::kF64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = first + step * double(i);
  return t;
}

TEST(EulerScheduler, StepGraphIsGuidanceThenEulerAsDiffusersOrdersIt) {
  const Tensor x = filled({1, 2, 2, 2}, 0.5, 0.25), eps = filled({2, 2, 2, 2}, -1, 0.125);
  const Tensor sigma = filled({1}, 2.5, 0), dt = filled({1}, -1.75, 0), g = filled({1}, 5, 0);
  auto out = ref::run_graph(
      build_euler_step_graph(true), {},
      {{"latents", x}, {"noise_pred", eps}, {"sigma", sigma}, {"dt", dt}, {"guidance_scale", g}},
      DType::kF64);
  ASSERT_TRUE(out.ok()) << out.error().message();
  const Tensor& prev = out->front().second;
  ASSERT_EQ(prev.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double u = eps.data<double>()[i], c = eps.data<double>()[i + 8];
    const double guided = u + 5 * (c - u);
    const double xi = x.data<double>()[i];
    const double pred_x0 = xi - 2.5 * guided;
    EXPECT_DOUBLE_EQ(prev.data<double>()[i], xi + (xi - pred_x0) / 2.5 * -1.75) << i;
  }
  auto scaled = ref::run_graph(build_euler_scale_graph(2), {},
                               {{"latents", x}, {"divisor", filled({1}, 2, 0)}}, DType::kF64);
  ASSERT_TRUE(scaled.ok()) << scaled.error().message();
  ASSERT_EQ(scaled->front().second.shape(), (Shape{2, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(scaled->front().second.data<double>()[9], x.data<double>()[1] / 2);
}

}  // namespace
}  // namespace tp
