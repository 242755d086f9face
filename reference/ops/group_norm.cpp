// torch.nn.GroupNorm (affine) over [B, C, *spatial] (any number of spatial axes: images and
// video): per (batch, group), biased variance, statistics in double with two passes (mean, then
// squared deviations) so no cancellation at any magnitude.
#include <algorithm>
#include <cmath>

#include "harness/core/parallel.h"
#include "reference/ops/ops.h"

namespace tp::ref {
namespace {

double lane_total(const double (&part)[8]) {
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

}  // namespace

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
    // Eight interleaved partial sums (vectorized; the order matters at 1e-16 in double).
    double part[8] = {};
    for (int64_t i = 0; i < n; ++i) part[i % 8] += double(in[i]);
    const double mean = lane_total(part) / double(n);
    std::fill(part, part + 8, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(in[i]) - mean;
      part[i % 8] += d * d;
    }
    const double sq = lane_total(part);
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
