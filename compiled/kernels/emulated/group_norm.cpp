// Channels-last GroupNorm (torch.nn.GroupNorm: biased variance, affine). Statistics are exact
// two-pass sums in double, rounded to fp32 (the contract asks for fp32 or better; a naive f16
// reduction overflows on SDXL-size groups, which the groupnorm-f16-accum fault reproduces).
#include <cmath>

#include "compiled/kernels/emulated/kernels.h"

namespace tp::compiled::emulated {

Tensor group_norm(const Tensor& x, const PreparedParam& gamma, const PreparedParam& beta,
                  int groups, double eps, bool f16_accumulation) {
  const int64_t b = x.dim(0), pixels = x.dim(1) * x.dim(2), c = x.dim(3), cpg = c / groups;
  const float* in = x.data<float>();
  Tensor out = Tensor::uninitialized(DType::kF32, x.shape());
  float* dst = out.data<float>();
  const double count = double(pixels * cpg);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < b; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const float* base = in + n * pixels * c + g * cpg;
      float mean = 0, rstd = 0;
      if (f16_accumulation) {
        float s = 0, ss = 0;
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t j = 0; j < cpg; ++j) {
            const float v = base[p * c + j];
            s = round_to(DType::kF16, s + v);
            ss = round_to(DType::kF16, ss + round_to(DType::kF16, v * v));
          }
        mean = float(s / count);
        rstd = 1.0f / std::sqrt(float(ss / count) - mean * mean + float(eps));
      } else {
        double s = 0;
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t j = 0; j < cpg; ++j) s += base[p * c + j];
        const double m = s / count;
        double ss = 0;
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t j = 0; j < cpg; ++j) ss += (base[p * c + j] - m) * (base[p * c + j] - m);
        mean = float(m);
        rstd = float(1.0 / std::sqrt(ss / count + eps));
      }
      float* o = dst + n * pixels * c + g * cpg;
      const float* gw = gamma.values.data() + g * cpg;
      const float* bw = beta.values.data() + g * cpg;
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t j = 0; j < cpg; ++j)
          o[p * c + j] = (base[p * c + j] - mean) * rstd * gw[j] + bw[j];
    }
  return out;
}

}  // namespace tp::compiled::emulated
