// The emulation's N-d convs (1 to 3 spatial axes, zero or replicate padding, grouped): in fp32 a
// GEMM of the stored weights and the patch matrix packed from a channels-last copy of the input
// (no column buffer); in fp64 (the tests against LibTorch) direct loops. Its own code: it shares
// none with the reference's.
#include <algorithm>
#include <array>
#include <type_traits>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "harness/core/transpose.h"

namespace tp::compiled::emulated {
namespace {

constexpr int64_t kParallelWork = kParallelElements;

// An N-d conv's geometry over x [B, Cin, *S] (1 to 3 spatial axes), weights stored
// [Cout][*K][Cin/groups]; the spatial extents padded to three axes with leading ones.
struct ConvExtents {
  int64_t batch = 0, cin = 0, cout = 0, cin_g = 0, cout_g = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
  bool replicate = false;

  ConvExtents(const Shape& x, const PreparedParam& w, const OpAttrs& a, const Shape& out_shape)
      : batch(x[0]), cin(x[1]), cout(w.shape[0]), replicate(a.pad_mode == PadMode::kReplicate) {
    cin_g = cin / a.conv_groups;
    cout_g = cout / a.conv_groups;
    const int spatial = int(x.size()) - 2;
    for (int i = 0; i < spatial; ++i) {
      const int d = 3 - spatial + i;
      in[d] = x[std::size_t(i) + 2];
      out[d] = out_shape[std::size_t(i) + 2];
      k[d] = w.shape[std::size_t(i) + 2];
      stride[d] = a.strides[std::size_t(i)];
      dil[d] = a.dilations[std::size_t(i)];
      lo[d] = a.pads_lo[std::size_t(i)];
    }
  }
  int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  int64_t taps() const { return k[0] * k[1] * k[2]; }
  // The input-plane offset output position p reads at tap t, or -1 where it reads a zero pad
  // (replicate padding reads the nearest edge instead).
  int64_t source(int64_t p, int64_t t) const {
    return source({p / (out[1] * out[2]), p / out[2] % out[1], p % out[2]}, tap(t));
  }
  // Tap t's offsets along the three axes.
  std::array<int64_t, 3> tap(int64_t t) const {
    return {t / (k[1] * k[2]), t / k[2] % k[1], t % k[2]};
  }
  // The same for output position o (its three coordinates) at tap offsets kt.
  int64_t source(const std::array<int64_t, 3>& o, const std::array<int64_t, 3>& kt) const {
    int64_t iz = o[0] * stride[0] + kt[0] * dil[0] - lo[0];
    int64_t iy = o[1] * stride[1] + kt[1] * dil[1] - lo[1];
    int64_t ix = o[2] * stride[2] + kt[2] * dil[2] - lo[2];
    const bool inside = iz >= 0 && iz < in[0] && iy >= 0 && iy < in[1] && ix >= 0 && ix < in[2];
    if (!inside) {
      if (!replicate) return -1;
      iz = std::min(std::max(iz, int64_t(0)), in[0] - 1);
      iy = std::min(std::max(iy, int64_t(0)), in[1] - 1);
      ix = std::min(std::max(ix, int64_t(0)), in[2] - 1);
    }
    return (iz * in[1] + iy) * in[2] + ix;
  }
};

template <class T>
Tensor conv_nd_loops(const Tensor& x, const PreparedParam& w, const PreparedParam* bias,
                     const OpAttrs& a, const Shape& out_shape) {
  const ConvExtents g(x.shape(), w, a, out_shape);
  const int64_t in_plane = g.in_plane(), out_plane = g.out_plane(), taps = g.taps();
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const T* px = x.data<T>();
  T* po = result.data<T>();
  const int64_t work = g.batch * g.cout * out_plane * taps * g.cin_g;
  const ParamFloats weights(w);
#pragma omp parallel for collapse(2) schedule(static) if (work > kParallelWork)
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t o = 0; o < g.cout; ++o) {
      const int64_t c0 = o / g.cout_g * g.cin_g;
      const float* wo = weights.data() + o * taps * g.cin_g;
      for (int64_t p = 0; p < out_plane; ++p) {
        T acc = 0;
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t src = g.source(p, t);
          if (src < 0) continue;  // zeros
          const T* xs = px + (b * g.cin + c0) * in_plane + src;
          const float* wt = wo + t * g.cin_g;
          for (int64_t c = 0; c < g.cin_g; ++c) acc += xs[c * in_plane] * T(wt[c]);
        }
        po[(b * g.cout + o) * out_plane + p] = finish(acc, w, bias, o);
      }
    }
  return result;
}

// One image's channel group [channels][plane] as channels-last [plane][channels], by strips of
// 16 positions.
void to_channels_last(const float* x, int64_t channels, int64_t plane, float* out) {
  constexpr int64_t kStrip = 16;
#pragma omp parallel for schedule(static) if (channels * plane >= kParallelWork)
  for (int64_t p0 = 0; p0 < plane; p0 += kStrip)
    simd::transpose_floats(x + p0, plane, out + p0 * channels, channels, channels,
                           std::min(kStrip, plane - p0));
}

// Rows [0, rows) of a panel (kNr columns) from kNr sources of `rows` contiguous floats each (a
// null source is a column of zeros): out[i * kNr + j] = src[j][i].
void gather_rows(const float* const (&src)[sgemm::kNr], int64_t rows, float* out) {
  constexpr int64_t nr = sgemm::kNr;
#if defined(__AVX512F__)
  static_assert(nr == 16);
  simd::panel_from_sources(src, rows, out);
#else
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < nr; ++j) out[i * nr + j] = src[j] ? src[j][i] : 0.0f;
#endif
}

// The first input coordinates of a panel's columns: output position times the stride, less
// the low pad, per axis (so tap offsets only add); lanes past `cols` are left out. In `Index`
// lanes: int32 wherever the planes fit, so the lane arithmetic below vectorizes (8 wide in
// this Zen 4 VM's build).
template <class Index>
struct PanelOrigins {
  Index z[sgemm::kNr], y[sgemm::kNr], x[sgemm::kNr];
  int64_t cols = 0;
};

template <class Index>
PanelOrigins<Index> panel_origins(const ConvExtents& g, int64_t p, int64_t cols) {
  PanelOrigins<Index> o;
  o.cols = cols;
  int64_t oz = p / (g.out[1] * g.out[2]), oy = p / g.out[2] % g.out[1], ox = p % g.out[2];
  for (int64_t j = 0; j < sgemm::kNr; ++j) {
    o.z[j] = Index(oz * g.stride[0] - g.lo[0]);
    o.y[j] = Index(oy * g.stride[1] - g.lo[1]);
    o.x[j] = Index(ox * g.stride[2] - g.lo[2]);
    if (++ox < g.out[2]) continue;  // the next position, without dividing
    ox = 0;
    if (++oy < g.out[1]) continue;
    oy = 0;
    ++oz;
  }
  return o;
}

// Where each column of a panel reads tap `kt` (offsets per axis): `base` plus the source's
// channels-last offset, or null where it reads a zero pad (replicate padding reads the nearest
// edge instead, as ConvExtents::source). Lane-wise arithmetic without branches, which the
// compiler vectorizes: on ci's few-channel video convs these sources were 3/4 of the packer's
// time, worked out one column at a time.
template <class Index>
void tap_sources(const ConvExtents& g, const PanelOrigins<Index>& o,
                 const std::array<int64_t, 3>& kt, const float* base,
                 const float* (&src)[sgemm::kNr]) {
  constexpr int64_t nr = sgemm::kNr;
  const Index dz = Index(kt[0] * g.dil[0]), dy = Index(kt[1] * g.dil[1]),
              dx = Index(kt[2] * g.dil[2]);
  const Index n0 = Index(g.in[0]), n1 = Index(g.in[1]), n2 = Index(g.in[2]);
  const Index replicate = g.replicate, cols = Index(o.cols);
  Index at[nr], keep[nr];  // keep: 0 or 1, in the lanes' own width
#pragma omp simd
  for (Index j = 0; j < Index(nr); ++j) {
    Index iz = o.z[j] + dz, iy = o.y[j] + dy, ix = o.x[j] + dx;
    const Index inside = Index(iz >= 0) & Index(iz < n0) & Index(iy >= 0) & Index(iy < n1) &
                         Index(ix >= 0) & Index(ix < n2);
    iz = std::min(std::max(iz, Index(0)), Index(n0 - 1));
    iy = std::min(std::max(iy, Index(0)), Index(n1 - 1));
    ix = std::min(std::max(ix, Index(0)), Index(n2 - 1));
    at[j] = (iz * n1 + iy) * n2 + ix;
    keep[j] = (inside | replicate) & Index(j < cols);
  }
  for (int64_t j = 0; j < nr; ++j) src[j] = keep[j] ? base + int64_t(at[j]) * g.cin_g : nullptr;
}

// Rows [k0, k0 + kc) of the panels of columns [n0, n0 + nc), as patch_packer below packs them.
template <class Index>
void pack_patches(const float* xl, const ConvExtents& g, int64_t k0, int64_t kc, int64_t n0,
                  int64_t nc, float* dst) {
  constexpr int64_t nr = sgemm::kNr;
  const int64_t cin = g.cin_g;
  const float* src[nr];
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    float* panel = dst + (j0 / nr) * kc * nr;
    const PanelOrigins<Index> origins = panel_origins<Index>(g, n0 + j0, std::min(nr, nc - j0));
    int64_t t = k0 / cin, c = k0 % cin;
    for (int64_t r = 0; r < kc; ++t, c = 0) {  // the rows of tap t from channel c on
      const int64_t run = std::min(cin - c, kc - r);
      tap_sources(g, origins, g.tap(t), xl + c, src);
      gather_rows(src, run, panel + r * nr);
      r += run;
    }
  }
}

// The patch matrix of one image's channel group, held channels-last (`xl`, [in_plane][Cin/groups]),
// as sgemm's B, packed straight from it block by block (no column buffer): B(t * Cin/groups + c,
// p) = xl[source(p, t)][c], rows in the weights' order. A tap's rows are its channels: for each
// panel of kNr positions, kNr runs of contiguous channels, transposed into the panel's rows.
sgemm::PackB patch_packer(const float* xl, const ConvExtents& g) {
  // int32 lanes while every input coordinate and plane offset fits them.
  const bool narrow = g.in_plane() < (int64_t(1) << 30) && g.out_plane() < (int64_t(1) << 30);
  return [xl, g, narrow](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
    if (narrow)
      pack_patches<int32_t>(xl, g, k0, kc, n0, nc, dst);
    else
      pack_patches<int64_t>(xl, g, k0, kc, n0, nc, dst);
  };
}

// conv_nd_loops in fp32 as a GEMM per image and channel group: W_g [Cout/groups][taps x Cin/groups]
// times the patch matrix, straight into the row-major output. The same products and fp32
// accumulation as the loop above, in another order.
Tensor conv_nd_gemm(const Tensor& x, const PreparedParam& w, const PreparedParam* bias,
                    const OpAttrs& a, const Shape& out_shape) {
  const ConvExtents g(x.shape(), w, a, out_shape);
  const int64_t in_plane = g.in_plane(), plane = g.out_plane(), width = g.taps() * g.cin_g;
  Tensor result = Tensor::uninitialized(DType::kF32, out_shape);
  const float* px = x.data<float>();
  float* po = result.data<float>();
  const ParamFloats weights(w);
  Tensor input_last = Tensor::uninitialized(DType::kF32, {in_plane, g.cin_g});
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t grp = 0; grp < a.conv_groups; ++grp) {
      float* out = po + (b * g.cout + grp * g.cout_g) * plane;
      to_channels_last(px + (b * g.cin + grp * g.cin_g) * in_plane, g.cin_g, in_plane,
                       input_last.data<float>());
      // Unscaled, the bias is the product's row bias: added after each sum, as finish() adds it.
      const bool unscaled = w.scales.empty();
      sgemm::gemm(g.cout_g, plane, width, {weights.data() + grp * g.cout_g * width, width, 1},
                  patch_packer(input_last.data<float>(), g), {out, plane, 1},
                  unscaled && bias ? bias->values.data() + grp * g.cout_g : nullptr);
      if (unscaled) continue;
#pragma omp parallel for schedule(static) if (g.cout_g * plane > kParallelWork)
      for (int64_t o = 0; o < g.cout_g; ++o)
        for (int64_t p = 0; p < plane; ++p)
          out[o * plane + p] = finish(out[o * plane + p], w, bias, grp * g.cout_g + o);
    }
  return result;
}

}  // namespace

template <class T>
Tensor conv_nd(const Tensor& x, const PreparedParam& w, const PreparedParam* bias, const OpAttrs& a,
               const Shape& out_shape) {
  if constexpr (std::is_same_v<T, float>) return conv_nd_gemm(x, w, bias, a, out_shape);
  return conv_nd_loops<T>(x, w, bias, a, out_shape);
}

template Tensor conv_nd<float>(const Tensor&, const PreparedParam&, const PreparedParam*,
                               const OpAttrs&, const Shape&);
template Tensor conv_nd<double>(const Tensor&, const PreparedParam&, const PreparedParam*,
                                const OpAttrs&, const Shape&);

}  // namespace tp::compiled::emulated
