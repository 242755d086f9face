// Channels-last GroupNorm (torch.nn.GroupNorm: biased variance, affine). Statistics are
// two-pass sums in double (per channel over fixed chunks of pixels, one sweep of memory per
// pass, then per group), the mean and 1/sd rounded to fp32, as the contract says (a naive f16
// reduction overflows on SDXL-size groups, which the groupnorm-f16-accum fault reproduces; a
// one-pass fp32 one cancels on large means, the groupnorm-one-pass fault). The same sums, in the
// same order, on a planar [B, C, *spatial] tensor (the video VAEs' row-major plans), which then
// needs no channels-last copy.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

namespace tp::compiled::emulated {

namespace {

constexpr int64_t kChunk = 256;  // pixels per partial sum: fixed, so sums do not depend on threads

// Where element (pixel p, channel j) of one image is: channels-last or planar.
struct Layout {
  int64_t pixels, c;
  bool planar;
  int64_t at(int64_t p, int64_t j) const { return planar ? j * pixels + p : p * c + j; }
};

// Per-channel double sums of f(v) over each chunk of pixels of one image: part[chunk * c + ch],
// each summed in pixel order (the loops run in the layout's memory order).
template <class F>
std::vector<double> channel_sums(const float* in, const Layout& l, F f) {
  const int64_t pixels = l.pixels, c = l.c, chunks = (pixels + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<std::size_t>(chunks * c), 0.0);
#pragma omp parallel for schedule(static) if (pixels * c >= kParallelElements)
  for (int64_t k = 0; k < chunks; ++k) {
    double* sums = part.data() + k * c;
    const int64_t end = std::min(pixels, (k + 1) * kChunk);
    if (l.planar) {
      for (int64_t j = 0; j < c; ++j)
        for (int64_t p = k * kChunk; p < end; ++p) sums[j] += f(in[j * pixels + p], j);
    } else {
      for (int64_t p = k * kChunk; p < end; ++p)
        for (int64_t j = 0; j < c; ++j) sums[j] += f(in[p * c + j], j);
    }
  }
  return part;
}

// Group totals of the chunk sums, in chunk order then channel order.
std::vector<double> group_totals(const std::vector<double>& part, int64_t c, int64_t groups) {
  std::vector<double> total(static_cast<std::size_t>(groups), 0.0);
  const int64_t cpg = c / groups;
  for (std::size_t k = 0; k < part.size(); k += std::size_t(c))
    for (int64_t j = 0; j < c; ++j) total[std::size_t(j / cpg)] += part[k + std::size_t(j)];
  return total;
}

}  // namespace

Tensor group_norm(const Tensor& x, const PreparedParam& gamma, const PreparedParam& beta,
                  int groups, double eps, DType one_pass, bool vector_tail, bool planar) {
  const int64_t b = x.dim(0), c = planar ? x.dim(1) : x.dim(3);
  const int64_t pixels = x.numel() / (b * c), cpg = c / groups;
  const Layout l{pixels, c, planar};
  Tensor out = Tensor::uninitialized(DType::kF32, x.shape());
  const double count = double(pixels * cpg);
  const auto channels = static_cast<std::size_t>(c);
  std::vector<float> mean(channels), rstd(channels);  // per channel, of its group
  for (int64_t n = 0; n < b; ++n) {
    const float* in = x.data<float>() + n * pixels * c;
    if (one_pass != DType::kF64) {
      for (int64_t g = 0; g < groups; ++g) {  // the faults: sequential sums, E[x^2] - E[x]^2
        float s = 0, ss = 0;
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t j = g * cpg; j < (g + 1) * cpg; ++j) {
            const float v = in[l.at(p, j)];
            s = round_to(one_pass, s + v);
            ss = round_to(one_pass, ss + round_to(one_pass, v * v));
          }
        const float m = float(s / count);
        const float r = 1.0f / std::sqrt(float(ss / count) - m * m + float(eps));
        std::fill(mean.begin() + g * cpg, mean.begin() + (g + 1) * cpg, m);
        std::fill(rstd.begin() + g * cpg, rstd.begin() + (g + 1) * cpg, r);
      }
    } else {  // two passes (mean, then squared deviations), so no cancellation
      const std::vector<double> sum =
          group_totals(channel_sums(in, l, [](float v, int64_t) { return double(v); }), c, groups);
      std::vector<double> m(channels);
      for (int64_t j = 0; j < c; ++j) m[std::size_t(j)] = sum[std::size_t(j / cpg)] / count;
      const std::vector<double> ss = group_totals(channel_sums(in, l,
                                                               [&m](float v, int64_t j) {
                                                                 const double d =
                                                                     v - m[std::size_t(j)];
                                                                 return d * d;
                                                               }),
                                                  c, groups);
      for (int64_t j = 0; j < c; ++j) {
        mean[std::size_t(j)] = float(m[std::size_t(j)]);
        rstd[std::size_t(j)] = float(1.0 / std::sqrt(ss[std::size_t(j / cpg)] / count + eps));
      }
    }
    float* o = out.data<float>() + n * pixels * c;
    const float* gw = gamma.values.data();
    const float* bw = beta.values.data();
    const int64_t vectors = vector_tail ? c - c % 8 : c;
    const auto normalize = [&](int64_t p, int64_t j) {
      const int64_t i = l.at(p, j);
      o[i] = j >= vectors ? in[i]  // the groupnorm-vector-tail fault
                          : (in[i] - mean[std::size_t(j)]) * rstd[std::size_t(j)] * gw[j] + bw[j];
    };
    if (planar) {
#pragma omp parallel for schedule(static) if (pixels * c >= kParallelElements)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t p = 0; p < pixels; ++p) normalize(p, j);
    } else {
#pragma omp parallel for schedule(static) if (pixels * c >= kParallelElements)
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t j = 0; j < c; ++j) normalize(p, j);
    }
  }
  return out;
}

}  // namespace tp::compiled::emulated
