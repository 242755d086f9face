// Tolerances: one table keyed by dtype policy and op class (docs/tolerances.md explains every
// factor and the measurements behind it). A bound is a named factor times the unit roundoff
// u = eps/2 of the coarsest dtype the values pass through, so a tolerance moves with the
// policy, never with the case.
#pragma once

#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/tensor.h"

namespace tp {

enum class OpClass : uint8_t { kConv, kGroupNorm, kAttention, kElementwise, kUpsample, kOutput };
const char* op_class_name(OpClass c);

struct Tolerance {
  double rel_l2 = 0;  // ||got - want|| / ||want||
  double max_element =
      0;              // max |got - want| / max |want|: one bad region cannot hide in an average
  std::string basis;  // "8 u(f16) = 3.9e-03": how the figure was derived
};

// A denoising loop's latents: how many standard errors from zero their mean signed error (in
// ulps, Metrics::bias_ulp / bias_se) may end after two or more steps. Unbiased rounding keeps it
// a random walk's (measured on ci's denoiser cases, reseeds 0-10: at most 3.5); a store that
// truncates adds a shift each step and reached 4.6-20 in 2-4 steps (docs/tolerances.md).
constexpr double kDriftZ = 6;

// The dtypes a checkpoint's values passed through: storage of its inputs and output, the
// weights, and the accumulator.
struct ValuePath {
  std::vector<DType>
      dtypes;  // inputs' and output's storage, and the weight dtype when the op has weights
  DType accumulation = DType::kF32;
  int64_t reduction =
      1;  // the longest sum (dot product, softmax row, GroupNorm group) in the group
  DType reference = DType::kF32;  // the reference sums in its own precision too
  // The group's error reaches the output through normalizations and residual sums that damp it
  // (a denoiser's blocks: Family::damps_errors), so it counts with kDampedOutputFactor.
  bool damped = false;
  // A timestep sinusoid's largest |t|: its fp32 argument t exp(-ln(1e4) i / half) carries the
  // rounding of exp and of the product, a few u of |t| (GPU expf is within 2 ulp, not glibc's
  // bits), and sin/cos pass that absolute error on (docs/tolerances.md). 0: no sinusoid.
  double sinusoid_argument = 0;
  // GroupNorm's conditioning on its input (group_norm_conditioning): where a group's |mean| >>
  // std (a near-constant input: a sliver tile of one latent column) it amplifies the input's
  // rounding by rms/std. 1: none measured, or zero-mean groups.
  double conditioning = 1;
  // ReLU's conditioning on its input x (relu_conditioning): ReLU is 1-Lipschitz, so the error
  // of its output is at most its input's, but measured against ||relu(x)||, which is small where
  // most of x is below zero (a narrow drawn config's layer): the local tolerance grows by
  // ||x|| / ||relu(x)||. 1: no ReLU, or none measured.
  double relu_conditioning = 1;
  // A conv's or linear's conditioning on its input (matrix_conditioning.h): where its sums
  // cancel, the roundings of its terms move the output by more than u of its size, by this
  // factor. Measured only for a local check the rule without it fails (it runs the op twice
  // more on the reference). 1: not measured.
  double matrix_conditioning = 1;
  // LayerNorm's conditioning on its input (layer_norm_conditioning), measured with
  // matrix_conditioning where a local check fails: a row of a few nearly equal values (a drawn
  // UNet level of 2 channels) normalizes their tiny spread. 1: not measured.
  double layer_norm_conditioning = 1;
};

// sqrt of the mean over (batch, group) of E[x^2] / (Var[x] + eps): the factor by which GroupNorm
// with `groups` groups multiplies the relative rounding error of its input `x` ([B, C, ...]).
double group_norm_conditioning(const Tensor& x, int groups, double eps);
// The same over LayerNorm's rows (its last `norm_dims` dims): a row of few elements whose values
// nearly agree (a drawn UNet level of 2 channels) normalizes their tiny spread.
double layer_norm_conditioning(const Tensor& x, int norm_dims, double eps);
// ||x|| / ||max(x, 0)||, or 1 when no element of x is above zero.
double relu_conditioning(const Tensor& x);

// One group alone on reference inputs (local error).
Tolerance local_tolerance(OpClass c, const ValuePath& path);
// A pipeline output after every group (accumulated error): the root sum of squares of each
// group's own unit roundoff and summation term, each times its factor (damped or passed on).
Tolerance output_tolerance(const std::vector<ValuePath>& groups);

// A chained pipeline's final output (harness/runner/chained_output.h): the second graph's own
// bound and the first graph's output bound times `gain`, the factor by which the reference's
// second graph amplified the handoff's measured error, in quadrature.
Tolerance chained_output_tolerance(const Tolerance& first, const Tolerance& second, double gain);

// An output's bound from the Monte Carlo rounding estimate (harness/runner/rounding_noise.h):
// `estimate` (the noisy reference's rel L2 against the reference, the largest of `draws`
// draws) times 3 (tolerance.cpp's kRoundingNoiseFactor).
Tolerance rounding_noise_tolerance(double estimate, int draws = 1);
// The draws of the estimate an output may take, one more each time the largest so far does not
// bound its error: one draw's estimate is steady on most models, but in a decoder whose gain
// takes bf16 roundings to an output error of 0.2-0.5 it moved by 2x between two draws (drawn
// HunyuanVideo VAE 43: 0.143 and 0.293 for one decoder on two nearly equal inputs).
constexpr int kRoundingDraws = 3;

// The measured fp32-vs-fp64 reference noise floor must stay this far below every f32 bound
// (checked by a test over the built-in models).
constexpr double kNoiseFloorMargin = 10;

double unit_roundoff(DType dt);  // eps/2

}  // namespace tp
