#include "cases/stress_inputs.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/core/numbers.h"
#include "harness/core/rng.h"

namespace tp {
namespace {

double dc_scale(const std::string& input) {
  return parse_number<double>(std::string_view(input).substr(3)).value_or(1);
}

}  // namespace

bool is_stress_input(const std::string& input) {
  return input.rfind("dc*", 0) == 0 || input == "heavy" || input == "runs" || input == "range";
}

std::string check_stress_input(const std::string& input) {
  if (input.rfind("dc*", 0) != 0) return "";
  const std::optional<double> k = parse_number<double>(std::string_view(input).substr(3));
  if (k && *k > 0 && std::isfinite(*k)) return "";
  return "expected input=dc*K with a positive offset K (channels get +-K, spread 1)";
}

Tensor stress_input(const Tensor& x, const std::string& input, uint64_t seed) {
  Tensor out = x.to(DType::kF32);
  float* v = out.data<float>();
  const int64_t n = out.numel();
  const int64_t channels = out.rank() > 1 ? out.dim(1) : 1;
  const int64_t inner = out.rank() > 2 ? n / (out.dim(0) * channels) : 1;
  Rng rng(seed, "stress:" + input);
  if (input.rfind("dc*", 0) == 0) {  // each channel offset by +-K, +-K/2 or +-K/4
    const double k = dc_scale(input);
    std::vector<double> offset(static_cast<std::size_t>(channels));
    for (double& o : offset)
      o = k * (rng.uniform() < 0.5 ? -1 : 1) * std::ldexp(1.0, -int(rng.uniform() * 3));
    for (int64_t i = 0; i < n; ++i) v[i] += float(offset[std::size_t((i / inner) % channels)]);
  } else if (input == "heavy") {  // Student's t with 2 degrees of freedom: x / sqrt(chi2_2 / 2)
    for (int64_t i = 0; i < n; ++i) {
      const double chi2 = -2 * std::log(1 - rng.uniform());  // chi-squared, 2 dof: exponential
      v[i] = float(std::clamp(double(v[i]) / std::sqrt(chi2 / 2), -1e4, 1e4));
    }
  } else if (input == "range") {
    // Magnitudes log-uniform over [2^-7, 1] x kRangeStressMax (4/7 of the elements above
    // 1/64 of f16's range), signs from the normals. bf16 and f32 share fp32's range, which the
    // fp32 reference has too (near it the reference overflows where they do), so every policy
    // gets f16's: the range 16-bit activations reach in real VAEs and UNets.
    for (int64_t i = 0; i < n; ++i)
      v[i] = float(std::copysign(kRangeStressMax * std::exp2(-7 * rng.uniform()), v[i]));
  } else if (input == "runs") {  // runs of 8 equal values along the last axis
    const int64_t last = out.dim(out.rank() - 1);
    for (int64_t i = 0; i < n; ++i)
      if (i % last % 8) v[i] = v[i - 1];
  }
  return out;
}

}  // namespace tp
