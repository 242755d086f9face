// N-dimensional convolution (1 to 3 spatial axes): per-axis stride, dilation and padding, zero
// or replicate padding (a causal time axis is padding (k-1)*dilation before, 0 after: diffusers'
// HunyuanVideoCausalConv3d), grouped. Direct loops, accumulating in T like the reference GEMM;
// a conv that conv2d_window() takes runs on the image conv (conv2d.cpp: im2col and GEMM).
#include <algorithm>

#include "harness/core/parallel.h"
#include "reference/ops/ops.h"

namespace tp::ref {

template <class T>
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, const OpAttrs& a) {
  if (const std::optional<Conv2dWindow> window = conv2d_window(a); window && x.rank() == 4)
    return conv2d<T>(x, weight, bias, *window);
  const int spatial = x.rank() - 2;
  TP_CHECK(
      spatial >= 1 && spatial <= 3 && weight.rank() == x.rank() && int(a.strides.size()) == spatial,
      "conv: input " + shape_string(x.shape()) + ", weight " + shape_string(weight.shape()));
  const int groups = a.conv_groups;
  const int64_t batch = x.dim(0), cin = x.dim(1), cout = weight.dim(0);
  const int64_t cin_g = cin / groups, cout_g = cout / groups;
  TP_CHECK(weight.dim(1) == cin_g, "conv: weight " + shape_string(weight.shape()) +
                                       " does not match " + std::to_string(cin) + " channels in " +
                                       std::to_string(groups) + " groups");
  // Spatial axes padded to three (leading axes of size 1).
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
  for (int i = 0; i < spatial; ++i) {
    const int j = 3 - spatial + i;
    in[j] = x.dim(2 + i);
    k[j] = weight.dim(2 + i);
    s[j] = a.strides[std::size_t(i)];
    d[j] = a.dilations[std::size_t(i)];
    lo[j] = a.pads_lo[std::size_t(i)];
    const int64_t span = in[j] + lo[j] + a.pads_hi[std::size_t(i)] - int64_t(d[j]) * (k[j] - 1) - 1;
    TP_CHECK(span >= 0, "conv: input " + shape_string(x.shape()) + " is smaller than its kernel");
    out[j] = span / s[j] + 1;
  }
  Shape out_shape{batch, cout};
  for (int i = 0; i < spatial; ++i) out_shape.push_back(out[3 - spatial + i]);
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const T* px = x.data<T>();
  const T* pw = weight.data<T>();
  const T* pb = bias ? bias->data<T>() : nullptr;
  T* po = result.data<T>();
  const int64_t in_vol = in[0] * in[1] * in[2], out_vol = out[0] * out[1] * out[2];
  const int64_t k_vol = k[0] * k[1] * k[2];
  const bool replicate = a.pad_mode == PadMode::kReplicate;
#pragma omp parallel for collapse(2) \
    schedule(static) if (batch * cout * out_vol * cin_g * k_vol >= kParallelMacs)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t co = 0; co < cout; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t o = 0; o < out_vol; ++o) {
        const int64_t o0 = o / (out[1] * out[2]), o1 = (o / out[2]) % out[1], o2 = o % out[2];
        T acc = pb ? pb[co] : T(0);
        for (int64_t ci = 0; ci < cin_g; ++ci) {
          const T* xc = px + (b * cin + g * cin_g + ci) * in_vol;
          const T* wc = pw + (co * cin_g + ci) * k_vol;
          for (int64_t kk = 0; kk < k_vol; ++kk) {
            const int64_t k0 = kk / (k[1] * k[2]), k1 = (kk / k[2]) % k[1], k2 = kk % k[2];
            int64_t i0 = o0 * s[0] - lo[0] + k0 * d[0], i1 = o1 * s[1] - lo[1] + k1 * d[1],
                    i2 = o2 * s[2] - lo[2] + k2 * d[2];
            if (replicate) {
              i0 = std::clamp<int64_t>(i0, 0, in[0] - 1);
              i1 = std::clamp<int64_t>(i1, 0, in[1] - 1);
              i2 = std::clamp<int64_t>(i2, 0, in[2] - 1);
            } else if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) {
              continue;
            }
            acc += xc[(i0 * in[1] + i1) * in[2] + i2] * wc[kk];
          }
        }
        po[(b * cout + co) * out_vol + o] = acc;
      }
    }
  return result;
}

template Tensor conv<float>(const Tensor&, const Tensor&, const Tensor*, const OpAttrs&);
template Tensor conv<double>(const Tensor&, const Tensor&, const Tensor*, const OpAttrs&);

}  // namespace tp::ref
