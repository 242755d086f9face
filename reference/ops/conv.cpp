// N-dimensional convolution (1 to 3 spatial axes): per-axis stride, dilation and padding, zero
// or replicate padding (a causal time axis is padding (k-1)*dilation before, 0 after: diffusers'
// HunyuanVideoCausalConv3d), grouped. One group: in fp32 the shared sgemm over every output
// position, its B panels gathered from the input (implicit GEMM); in fp64 im2col over blocks of
// output positions and Eigen, so the column buffer stays small at any size;
// grouped convs: direct loops, accumulating in T. A conv that conv2d_window() takes runs on the
// image conv (conv2d.cpp).
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "reference/ops/ops.h"

namespace tp::ref {
namespace {

// Element budget of one block's column buffer (as conv2d.cpp's).
constexpr int64_t kColumnBudget = 1 << 21;

// The conv's geometry with its spatial axes padded to three (leading axes of size 1).
struct Geometry {
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
  bool replicate = false;
  int64_t in_vol() const { return in[0] * in[1] * in[2]; }
  int64_t out_vol() const { return out[0] * out[1] * out[2]; }
  int64_t k_vol() const { return k[0] * k[1] * k[2]; }

  // The input offset tap `kk` of output position `o` reads, or -1 for a zero pad.
  int64_t source(int64_t o, int64_t kk) const {
    const int64_t o_at[3] = {o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]};
    const int64_t k_at[3] = {kk / (k[1] * k[2]), (kk / k[2]) % k[1], kk % k[2]};
    int64_t i[3];
    for (int a = 0; a < 3; ++a) {
      i[a] = o_at[a] * s[a] - lo[a] + k_at[a] * d[a];
      if (replicate) i[a] = std::clamp<int64_t>(i[a], 0, in[a] - 1);
      if (i[a] < 0 || i[a] >= in[a]) return -1;
    }
    return (i[0] * in[1] + i[1]) * in[2] + i[2];
  }
};

Geometry geometry(const Tensor& x, const Tensor& weight, const OpAttrs& a) {
  const int spatial = x.rank() - 2;
  Geometry g;
  g.replicate = a.pad_mode == PadMode::kReplicate;
  for (int i = 0; i < spatial; ++i) {
    const int j = 3 - spatial + i;
    g.in[j] = x.dim(2 + i);
    g.k[j] = weight.dim(2 + i);
    g.s[j] = a.strides[std::size_t(i)];
    g.d[j] = a.dilations[std::size_t(i)];
    g.lo[j] = a.pads_lo[std::size_t(i)];
    const int64_t span = g.in[j] + g.lo[j] + a.pads_hi[std::size_t(i)] - g.d[j] * (g.k[j] - 1) - 1;
    TP_CHECK(span >= 0, "conv: input " + shape_string(x.shape()) + " is smaller than its kernel");
    g.out[j] = span / g.s[j] + 1;
  }
  return g;
}

// Row `row` (one channel and tap) of the conv's patch matrix at output positions [o0, o0 + n):
// put(j, value) for position o0 + j, and put_run(j, src, len) for positions o0 + j onwards that
// read `len` consecutive inputs (a stride-1 last axis inside the input). The positions run along
// output rows, the row's first two input coordinates computed once per output row and the last
// stepped by the stride: no division per element (Geometry::source's, which the grouped direct
// loop keeps).
template <class T, class Put, class PutRun>
void gather_row(const T* x, const Geometry& g, int64_t row, int64_t o0, int64_t n, Put put,
                PutRun put_run) {
  const int64_t k_vol = g.k_vol();
  const T* xc = x + (row / k_vol) * g.in_vol();
  const int64_t kk = row % k_vol;
  const int64_t k_at[3] = {kk / (g.k[1] * g.k[2]), (kk / g.k[2]) % g.k[1], kk % g.k[2]};
  // Input coordinate along axis a of output coordinate o; -1 where the zero pad is read.
  auto coord = [&](int a, int64_t o) {
    const int64_t i = o * g.s[a] - g.lo[a] + k_at[a] * g.d[a];
    if (g.replicate) return std::clamp<int64_t>(i, 0, g.in[a] - 1);
    return i < 0 || i >= g.in[a] ? int64_t(-1) : i;
  };
  // Along the last axis, output coordinates [inner_lo, inner_hi) read inside the input.
  const int64_t shift = k_at[2] * g.d[2] - g.lo[2];
  const int64_t inner_lo = g.s[2] == 1 ? std::max<int64_t>(0, -shift) : 0;
  const int64_t inner_hi = g.s[2] == 1 ? std::max(inner_lo, g.in[2] - shift) : 0;
  for (int64_t o = o0; o < o0 + n;) {
    const int64_t line = o / g.out[2], ox0 = o % g.out[2];
    const int64_t end = std::min(o0 + n, (line + 1) * g.out[2]), ox_end = ox0 + (end - o);
    const int64_t it = coord(0, line / g.out[1]), iy = coord(1, line % g.out[1]);
    const T* src = it < 0 || iy < 0 ? nullptr : xc + (it * g.in[1] + iy) * g.in[2];
    for (int64_t ox = ox0; ox < ox_end;) {
      const int64_t j = o - o0 + ox - ox0;
      if (src && ox >= inner_lo && ox < inner_hi) {
        const int64_t len = std::min(ox_end, inner_hi) - ox;
        put_run(j, src + ox + shift, len);
        ox += len;
        continue;
      }
      const int64_t ix = src ? coord(2, ox) : -1;
      put(j, ix < 0 ? T(0) : src[ix]);
      ++ox;
    }
    o = end;
  }
}

// cols[ci * k_vol + kk][o - o0] for output positions [o0, o0 + n): the input each tap reads.
template <class T>
void im2col(const T* x, int64_t cin, const Geometry& g, int64_t o0, int64_t n, T* cols) {
  const int64_t k_vol = g.k_vol();
#pragma omp parallel for schedule(static) if (cin * k_vol * n >= kParallelElements)
  for (int64_t row = 0; row < cin * k_vol; ++row) {
    T* out = cols + row * n;
    gather_row(
        x, g, row, o0, n, [out](int64_t j, T v) { out[j] = v; },
        [out](int64_t j, const T* src, int64_t len) { std::copy_n(src, len, out + j); });
  }
}

// fp32: the patch matrix packed straight from the input, block by block as sgemm asks (implicit
// GEMM: the weights packed once per call, no column buffer).
sgemm::PackB implicit_patches(const float* x, const Geometry& g) {
  constexpr int64_t nr = sgemm::kNr;
  return [x, g](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
    auto at = [dst, kc](int64_t r, int64_t j) {
      return dst + (j / nr) * kc * nr + r * nr + j % nr;
    };
    for (int64_t r = 0; r < kc; ++r)
      gather_row(
          x, g, k0 + r, n0, nc, [&](int64_t j, float v) { *at(r, j) = v; },
          [&](int64_t j, const float* src, int64_t len) {
            while (len > 0) {  // up to the end of j's panel row at a time
              const int64_t chunk = std::min(len, nr - j % nr);
              std::copy_n(src, chunk, at(r, j));
              src += chunk;
              j += chunk;
              len -= chunk;
            }
          });
    const int64_t padded = (nc + nr - 1) / nr * nr;
    for (int64_t r = 0; r < kc; ++r)  // the last panel's zero columns
      for (int64_t j = nc; j < padded; ++j) *at(r, j) = 0;
  };
}

// fp64: out[co][o] (row stride out_vol) = w[co][:] . cols[:][o] + bias[co], for n positions.
void gemm(const double* w, const double* cols, const double* bias, int64_t cout, int64_t k,
          int64_t n, int64_t out_vol, double* out) {
  using Rows = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Rows, 0, Eigen::OuterStride<>> o(out, cout, n, Eigen::OuterStride<>(out_vol));
  o.noalias() = Eigen::Map<const Rows>(w, cout, k) * Eigen::Map<const Rows>(cols, k, n);
  if (bias)
    for (int64_t c = 0; c < cout; ++c) o.row(c).array() += bias[c];
}

// Grouped convs: direct sums.
template <class T>
void direct(const T* px, const T* pw, const T* pb, const Geometry& g, int64_t batch, int64_t cin,
            int64_t cout, int groups, T* po) {
  const int64_t cin_g = cin / groups, cout_g = cout / groups;
  const int64_t in_vol = g.in_vol(), out_vol = g.out_vol(), k_vol = g.k_vol();
#pragma omp parallel for collapse(2) \
    schedule(static) if (batch * cout * out_vol * cin_g * k_vol >= kParallelMacs)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t co = 0; co < cout; ++co) {
      const int64_t grp = co / cout_g;
      for (int64_t o = 0; o < out_vol; ++o) {
        T acc = pb ? pb[co] : T(0);
        for (int64_t ci = 0; ci < cin_g; ++ci) {
          const T* xc = px + (b * cin + grp * cin_g + ci) * in_vol;
          const T* wc = pw + (co * cin_g + ci) * k_vol;
          for (int64_t kk = 0; kk < k_vol; ++kk)
            if (const int64_t at = g.source(o, kk); at >= 0) acc += xc[at] * wc[kk];
        }
        po[(b * cout + co) * out_vol + o] = acc;
      }
    }
}

}  // namespace

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
  TP_CHECK(weight.dim(1) == cin / groups, "conv: weight " + shape_string(weight.shape()) +
                                              " does not match " + std::to_string(cin) +
                                              " channels in " + std::to_string(groups) + " groups");
  const Geometry g = geometry(x, weight, a);
  Shape out_shape{batch, cout};
  for (int i = 0; i < spatial; ++i) out_shape.push_back(g.out[3 - spatial + i]);
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const T* pb = bias ? bias->data<T>() : nullptr;
  if (groups != 1) {
    direct(x.data<T>(), weight.data<T>(), pb, g, batch, cin, cout, groups, result.data<T>());
    return result;
  }
  const int64_t k = cin * g.k_vol(), out_vol = g.out_vol();
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t b = 0; b < batch; ++b)
      sgemm::gemm(cout, out_vol, k, {weight.data<float>(), k, 1},
                  implicit_patches(x.data<float>() + b * cin * g.in_vol(), g),
                  {result.data<float>() + b * cout * out_vol, out_vol, 1}, pb);
  } else {
    const int64_t block = std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(k, 1), 1, out_vol);
    std::vector<T> cols(std::size_t(k * block));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t o0 = 0; o0 < out_vol; o0 += block) {
        const int64_t n = std::min(block, out_vol - o0);
        im2col(x.data<T>() + b * cin * g.in_vol(), cin, g, o0, n, cols.data());
        gemm(weight.data<T>(), cols.data(), pb, cout, k, n, out_vol,
             result.data<T>() + b * cout * out_vol + o0);
      }
  }
  return result;
}

template Tensor conv<float>(const Tensor&, const Tensor&, const Tensor*, const OpAttrs&);
template Tensor conv<double>(const Tensor&, const Tensor&, const Tensor*, const OpAttrs&);

}  // namespace tp::ref
