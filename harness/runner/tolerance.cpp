#include "harness/runner/tolerance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "harness/core/format.h"

namespace tp {
namespace {

// Named factors (docs/tolerances.md gives the measurements behind each).
// One group alone: its inputs rounded to storage, weights rounded, one rounding at the store.
// Independent roundings of relative size <= u give a relative L2 of about u/sqrt(3) each; a few
// of them add in quadrature (measured: up to 1.0 u for f16/bf16 convs), so 3 u keeps 3x margin.
constexpr double kLocalFactor = 3;
// GroupNorm divides by the group's standard deviation: where |mean| >> std the input's rounding
// error (relative to |x|) is amplified by |mean|/std. Measured GroupNorm local errors on the
// built-in models reach 0.17 of 6 u (about 1 u); 6 u keeps that margin without hiding a wrong
// statistic (which moves every element by O(1)).
constexpr double kGroupNormFactor = 6;
// Attention's softmax turns score errors into relative weight errors multiplied by the score
// magnitude |q.k| * scale. Measured attention local errors reach 0.18 of 4 u.
constexpr double kAttentionFactor = 4;
// A K-term sum rounds K times; with rounding errors of random sign the relative error grows like
// sqrt(K) * u(accumulator), and the reference's own sum adds the same in its precision. This term
// is what an f32 policy is judged by (its storage roundings are as fine as the reference's), and
// what acc=f16 pays. Measured f32 local errors on the built-in models stay under 0.25 of the bound.
constexpr double kSumFactor = 1;
// A pipeline output carries every group's error: independent errors add in quadrature, so the
// bound is the root sum of squares of the groups' own (u + summation) terms. GroupNorm and the
// residual paths are assumed to pass them on with a gain near 1; measured outputs reach 0.58 of
// 2 x that root sum (f16), so the factor 2 keeps a 1.7x margin.
constexpr double kOutputFactor = 2;
// A denoiser's group passes its error on through the GroupNorms, LayerNorms and residual sums of
// the blocks after it, which damp it: with factor 2, measured UNet outputs reached only 0.15 of
// the bound (f16). With 0.6 they reach 0.50, a 2x margin (docs/tolerances.md).
constexpr double kDampedOutputFactor = 0.6;
// An output's error against the Monte Carlo rounding estimate (rounding_noise.h): a
// round-to-nearest store's relative error has rms 0.42 u (values log-uniform in a binade)
// against the estimate's uniform +-u, 0.58 u, so where every rounding is a store the error is
// 0.73 of the estimate (measured median 0.75); a fused group's internal roundings (attention's
// probabilities in the activation dtype) are not perturbed, and took it to 2.06
// (docs/tolerances.md).
constexpr double kRoundingNoiseFactor = 3;
// The worst element against the output's largest magnitude: a region broken by a bug moves
// elements by O(max|want|), while rounding moves them by a few u of it.
constexpr double kElementFactor = 8;

double summation_u(const ValuePath& path) {
  return kSumFactor * std::sqrt(double(std::max<int64_t>(path.reduction, 1))) *
         (unit_roundoff(path.accumulation) + unit_roundoff(path.reference));
}

// docs/tolerances.md's timestep sinusoid rule, 20 u max|t| + 8 u in fp32, absolute; its values
// have an rms near 1/sqrt(2), so the same figure bounds the relative L2 within a factor 1.5.
constexpr double kSinusoidArgumentFactor = 20, kSinusoidFactor = 8;
double sinusoid_u(const ValuePath& path) {
  if (path.sinusoid_argument <= 0) return 0;
  return 1.5 * (kSinusoidArgumentFactor * path.sinusoid_argument + kSinusoidFactor) *
         unit_roundoff(DType::kF32);
}

double coarsest_u(const ValuePath& path) {
  double u = unit_roundoff(DType::kF32);
  for (DType d : path.dtypes) u = std::max(u, unit_roundoff(d));
  return u * std::max(1.0, path.conditioning);
}

DType coarsest(const ValuePath& path) {
  DType c = DType::kF32;
  for (DType d : path.dtypes)
    if (unit_roundoff(d) > unit_roundoff(c)) c = d;
  return c;
}

}  // namespace

namespace {

// sqrt of the mean over `sets` contiguous sets of x of E[x^2] / (Var[x] + eps).
double norm_conditioning(const Tensor& x, int64_t sets, double eps) {
  const Tensor f = x.to(DType::kF64);
  const double* values = f.data<double>();
  const int64_t per = f.numel() / sets;
  double sum = 0;
  for (int64_t k = 0; k < sets; ++k) {
    double m = 0, m2 = 0;
    for (int64_t i = 0; i < per; ++i) {
      const double v = values[k * per + i];
      m += v;
      m2 += v * v;
    }
    m /= double(per);
    m2 /= double(per);
    const double var = std::max(0.0, m2 - m * m);
    sum += var + eps > 0 ? m2 / (var + eps) : 1;
  }
  return std::sqrt(sum / double(sets));
}

}  // namespace

double group_norm_conditioning(const Tensor& x, int groups, double eps) {
  if (x.rank() < 2 || groups <= 0 || x.numel() == 0) return 1;
  return norm_conditioning(x, x.dim(0) * groups, eps);
}

double layer_norm_conditioning(const Tensor& x, int norm_dims, double eps) {
  if (norm_dims < 1 || norm_dims > x.rank() || x.numel() == 0) return 1;
  int64_t row = 1;
  for (int d = x.rank() - norm_dims; d < x.rank(); ++d) row *= x.dim(d);
  return norm_conditioning(x, x.numel() / row, eps);
}

double relu_conditioning(const Tensor& x) {
  const Tensor f = x.to(DType::kF64);
  double all = 0, above = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double v = f.data<double>()[i];
    all += v * v;
    above += v > 0 ? v * v : 0;
  }
  return above > 0 ? std::sqrt(all / above) : 1;
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kConv:
      return "conv";
    case OpClass::kGroupNorm:
      return "group_norm";
    case OpClass::kAttention:
      return "attention";
    case OpClass::kElementwise:
      return "elementwise";
    case OpClass::kUpsample:
      return "upsample";
    case OpClass::kOutput:
      return "output";
  }
  return "?";
}

double unit_roundoff(DType dt) { return dtype_epsilon(dt) / 2; }

Tolerance local_tolerance(OpClass c, const ValuePath& path) {
  double factor = kLocalFactor;
  if (c == OpClass::kGroupNorm) factor = kGroupNormFactor;
  if (c == OpClass::kAttention) factor = kAttentionFactor;
  const double relu = std::max(1.0, path.relu_conditioning),
               matrix = std::max(1.0, path.matrix_conditioning),
               layer_norm = std::max(1.0, path.layer_norm_conditioning);
  const double value = relu * matrix * layer_norm *
                       (factor * coarsest_u(path) + summation_u(path) + sinusoid_u(path));
  char buf[200];
  if (path.conditioning > 1)
    std::snprintf(buf, sizeof buf, "%.3g u(%s) x GroupNorm conditioning %.3g + sum K=%lld", factor,
                  dtype_name(coarsest(path)), path.conditioning,
                  static_cast<long long>(path.reduction));
  else if (path.sinusoid_argument > 0)
    std::snprintf(buf, sizeof buf, "%.3g u(%s) + sinusoid max|t|=%.4g", factor,
                  dtype_name(coarsest(path)), path.sinusoid_argument);
  else
    std::snprintf(buf, sizeof buf, "%.3g u(%s) + sum K=%lld", factor, dtype_name(coarsest(path)),
                  static_cast<long long>(path.reduction));
  std::string basis = buf;
  if (relu > 1) basis = "(" + basis + ") x ReLU conditioning " + printf_numbers("%.3g", relu);
  if (matrix > 1)
    basis = "(" + basis + ") x " + (c == OpClass::kConv ? "conv" : "matrix") + " conditioning " +
            printf_numbers("%.3g", matrix);
  if (layer_norm > 1)
    basis = "(" + basis + ") x LayerNorm conditioning " + printf_numbers("%.3g", layer_norm);
  return Tolerance{value, kElementFactor * value, basis + printf_numbers(" = %.2e", value)};
}

Tolerance output_tolerance(const std::vector<ValuePath>& groups) {
  double squares = 0;
  std::size_t damped = 0;
  DType worst = DType::kF32;
  for (const ValuePath& g : groups) {
    const double e = (g.damped ? kDampedOutputFactor : kOutputFactor) *
                     (coarsest_u(g) + summation_u(g) + sinusoid_u(g));
    squares += e * e;
    damped += g.damped ? 1 : 0;
    if (unit_roundoff(coarsest(g)) > unit_roundoff(worst)) worst = coarsest(g);
  }
  const double value = std::sqrt(squares);
  char buf[128];
  if (damped == 0)
    std::snprintf(buf, sizeof buf, "%.3g x rss of %zu groups' u (up to %s) = %.2e", kOutputFactor,
                  groups.size(), dtype_name(worst), value);
  else
    std::snprintf(buf, sizeof buf,
                  "rss of %zu groups' u (up to %s) x %.3g, %zu damped x %.3g = %.2e",
                  groups.size() - damped, dtype_name(worst), kOutputFactor, damped,
                  kDampedOutputFactor, value);
  return Tolerance{value, kElementFactor * value, buf};
}

Tolerance chained_output_tolerance(const Tolerance& first, const Tolerance& second, double gain) {
  const double value = std::hypot(second.rel_l2, gain * first.rel_l2);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "the second graph's %.2e and the first's %.2e x its measured gain %.3g, in "
                "quadrature = %.2e",
                second.rel_l2, first.rel_l2, gain, value);
  return Tolerance{value, kElementFactor * value, buf};
}

Tolerance rounding_noise_tolerance(double estimate, int draws) {
  const double value = kRoundingNoiseFactor * estimate;
  return Tolerance{
      value, kElementFactor * value,
      printf_numbers("%.3g x Monte Carlo rounding estimate %.3g", kRoundingNoiseFactor, estimate) +
          (draws > 1 ? " (largest of " + std::to_string(draws) + " draws)" : "") +
          printf_numbers(" = %.2e", value)};
}

}  // namespace tp
