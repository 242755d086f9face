// torch.nn.GroupNorm (affine) over [B, C, *spatial] (any number of spatial axes: images and
// video): per (batch, group), biased variance, statistics in double with two passes (mean, then
// squared deviations) so no cancellation at any magnitude.
#include <cmath>

#include "harness/core/parallel.h"
#include "reference/ops/ops.h"

namespace tp::ref {

template <class T>
Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups,
                  double eps) {
  const int64_t batch = x.dim(0), c = x.dim(1), hw = x.numel() / (batch * c);
  TP_CHECK(c % groups == 0, "channels " + std::to_string(c) + " not divisible by groups");
  const int64_t cg = c / groups, n = cg * hw;
  Tensor out = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const T* g = gamma.data<T>();
  const T* bt = beta.data<T>();
#pragma omp parallel for schedule(dynamic) if (x.numel() >= kParallelElements)
  for (int64_t bg = 0; bg < batch * groups; ++bg) {
    const T* in = x.data<T>() + bg * n;
    T* o = out.data<T>() + bg * n;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(in[i]);
    const double mean = sum / double(n);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(in[i]) - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / std::sqrt(sq / double(n) + eps);
    const int64_t c0 = (bg % groups) * cg;
    for (int64_t ch = 0; ch < cg; ++ch) {
      const double scale = rstd * double(g[c0 + ch]), shift = double(bt[c0 + ch]);
      for (int64_t i = ch * hw; i < (ch + 1) * hw; ++i)
        o[i] = T((double(in[i]) - mean) * scale + shift);
    }
  }
  return out;
}

template Tensor group_norm<float>(const Tensor&, const Tensor&, const Tensor&, int, double);
template Tensor group_norm<double>(const Tensor&, const Tensor&, const Tensor&, int, double);

}  // namespace tp::ref
