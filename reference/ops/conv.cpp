// N-dimensional convolution (1 to 3 spatial axes): per-axis stride, dilation and padding, zero
// or replicate padding (a causal time axis is padding (k-1)*dilation before, 0 after: diffusers'
// HunyuanVideoCausalConv3d), grouped. One group: in fp32 the shared sgemm over every output
// position, its B panels gathered from the input (implicit GEMM: a panel row of 16 positions in
// one output line is one vector copy, edges filled in registers); in fp64 im2col over blocks of
// output positions and Eigen, so the column buffer stays small at any size;
// grouped convs: direct loops, accumulating in T. A conv that conv2d_window() takes runs on the
// image conv (conv2d.cpp).
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

  // The input coordinate read along axis `a` at unpadded coordinate `i` (output coordinate x
  // stride + the tap's shift): clamped when replicating, else -1 where the zero pad is read.
  int64_t read_at(int a, int64_t i) const {
    if (replicate) return std::clamp<int64_t>(i, 0, in[a] - 1);
    return i < 0 || i >= in[a] ? int64_t(-1) : i;
  }
  // Tap `kk`'s shift along axis `a`: k * dilation - pad_lo.
  int64_t shift(int a, int64_t kk) const {
    const int64_t k_at = a == 0 ? kk / (k[1] * k[2]) : a == 1 ? (kk / k[2]) % k[1] : kk % k[2];
    return k_at * d[a] - lo[a];
  }
  // The input offset tap `kk` of output position `o` reads, or -1 for a zero pad.
  int64_t source(int64_t o, int64_t kk) const {
    const int64_t o_at[3] = {o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]};
    int64_t i[3];
    for (int a = 0; a < 3; ++a) {
      i[a] = read_at(a, o_at[a] * s[a] + shift(a, kk));
      if (i[a] < 0) return -1;
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
  auto coord = [&](int a, int64_t o) { return g.read_at(a, o * g.s[a] + g.shift(a, kk)); };
  // Along the last axis, output coordinates [inner_lo, inner_hi) read inside the input.
  const int64_t shift = g.shift(2, kk);
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

// A run of a panel's lanes that lies in one output line: lanes [a, b) are that line's output
// columns ox_a, ox_a + 1, ... (a stride-1 last axis); the line's first input coordinates in time
// and height before a tap's shift (output coordinate x stride).
struct Segment {
  int64_t t, y, a, b, ox_a;
};

// A tap of the kernel as its shift along each axis (k * dilation - pad_lo).
struct Shift {
  int64_t at[3];
};

// One K row of the patch matrix (one input channel and tap): the channel's first element and
// the tap's index in the kernel.
struct Tap {
  int64_t channel, kk;
};

// Where a tap reads a panel that lies in one output line: a line of the input from `offset`
// (past the channel's first element), wholly inside it (kInside), partly in the pad (kEdge), or
// a zero pad line (kZero).
struct TapRead {
  enum Kind : int8_t { kZero, kInside, kEdge } kind;
  int64_t offset;
};

// Lanes [a, b) of a panel row: the input line at row_ptr (in_w values) read from column
// ix_a + (l - a) for lane l, the pad outside (the edge value when replicating, else 0). Lanes
// outside [a, b) are kept.
#if defined(__AVX512F__)
using PanelRow = __m512;
inline PanelRow zero_row() { return _mm512_setzero_ps(); }
inline __mmask16 lanes(int64_t lo, int64_t hi) {
  return hi <= lo ? __mmask16(0) : __mmask16(((1u << (hi - lo)) - 1) << lo);
}
inline PanelRow put_segment(PanelRow v, const float* row_ptr, int64_t in_w, int64_t ix_a, int64_t a,
                            int64_t b, bool replicate) {
  static_assert(sgemm::kNr == 16);
  const int64_t lo = std::clamp(a - ix_a, a, b), hi = std::clamp(a + in_w - ix_a, lo, b);
  v = _mm512_mask_loadu_ps(v, lanes(lo, hi), row_ptr + ix_a - a);
  if (replicate && lo > a) v = _mm512_mask_mov_ps(v, lanes(a, lo), _mm512_set1_ps(row_ptr[0]));
  if (replicate && hi < b)
    v = _mm512_mask_mov_ps(v, lanes(hi, b), _mm512_set1_ps(row_ptr[in_w - 1]));
  return v;
}
inline void store_row(PanelRow v, float* dst) { _mm512_storeu_ps(dst, v); }
inline void copy_panel_row(const float* src, float* dst) {
  _mm512_storeu_ps(dst, _mm512_loadu_ps(src));
}
#else
struct PanelRow {
  float v[sgemm::kNr];
};
inline PanelRow zero_row() { return PanelRow{}; }
inline PanelRow put_segment(PanelRow v, const float* row_ptr, int64_t in_w, int64_t ix_a, int64_t a,
                            int64_t b, bool replicate) {
  for (int64_t l = a; l < b; ++l) {
    const int64_t ix = ix_a + l - a;
    if (ix >= 0 && ix < in_w)
      v.v[l] = row_ptr[ix];
    else if (replicate)
      v.v[l] = row_ptr[ix < 0 ? 0 : in_w - 1];
  }
  return v;
}
inline void store_row(const PanelRow& v, float* dst) { std::copy_n(v.v, sgemm::kNr, dst); }
inline void copy_panel_row(const float* src, float* dst) { std::copy_n(src, sgemm::kNr, dst); }
#endif

// Splits the panel of output positions [o, o + cols) into its output lines.
int split_lines(const Geometry& g, int64_t o, int64_t cols, Segment* segments) {
  int count = 0;
  for (int64_t a = 0; a < cols;) {
    const int64_t line = (o + a) / g.out[2], ox = (o + a) % g.out[2];
    const int64_t b = std::min(cols, a + g.out[2] - ox);
    segments[count++] = {line / g.out[1] * g.s[0], line % g.out[1] * g.s[1], a, b, ox};
    a = b;
  }
  return count;
}

// A panel of kNr output positions in one output line (the common case): where each tap reads is
// worked out once for the panel, and a tap that reads inside the input is one vector copy.
void pack_line_panel(const float* x, const Geometry& g, const std::vector<Shift>& shifts,
                     const std::vector<Tap>& taps, const Segment& seg, float* panel) {
  constexpr int64_t nr = sgemm::kNr;
  thread_local std::vector<TapRead> reads;
  reads.resize(shifts.size());
  for (std::size_t kk = 0; kk < shifts.size(); ++kk) {
    const int64_t it = g.read_at(0, seg.t + shifts[kk].at[0]);
    const int64_t iy = g.read_at(1, seg.y + shifts[kk].at[1]);
    const int64_t ix = seg.ox_a + shifts[kk].at[2];
    TapRead& read = reads[kk];
    read.offset = (it * g.in[1] + iy) * g.in[2];
    read.kind = it < 0 || iy < 0                ? TapRead::kZero
                : ix >= 0 && ix + nr <= g.in[2] ? TapRead::kInside
                                                : TapRead::kEdge;
    if (read.kind == TapRead::kInside) read.offset += ix;
  }
  for (std::size_t r = 0; r < taps.size(); ++r) {
    const Tap& t = taps[r];
    const TapRead& read = reads[std::size_t(t.kk)];
    float* out = panel + int64_t(r) * nr;
    if (read.kind == TapRead::kInside) {
      copy_panel_row(x + t.channel + read.offset, out);
      continue;
    }
    PanelRow v = zero_row();
    if (read.kind == TapRead::kEdge)
      v = put_segment(v, x + t.channel + read.offset, g.in[2],
                      seg.ox_a + shifts[std::size_t(t.kk)].at[2], 0, nr, g.replicate);
    store_row(v, out);
  }
}

// The rows [k0, k0 + kc) of the patch matrix for a stride-1 last axis, a panel at a time and
// each panel row (one tap, kNr output positions) as one vector: the panel is written in order
// and each of its rows is one or a few runs of the input, read with edge lanes filled.
void pack_panels(const float* x, const Geometry& g, const std::vector<Shift>& shifts, int64_t k0,
                 int64_t kc, int64_t n0, int64_t nc, float* dst) {
  constexpr int64_t nr = sgemm::kNr;
  thread_local std::vector<Tap> taps;
  const int64_t k_vol = g.k_vol();
  taps.resize(std::size_t(kc));
  for (int64_t r = 0; r < kc; ++r)
    taps[std::size_t(r)] = {(k0 + r) / k_vol * g.in_vol(), (k0 + r) % k_vol};
  Segment segments[nr];
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    const int count = split_lines(g, n0 + j0, std::min(nr, nc - j0), segments);
    float* panel = dst + (j0 / nr) * kc * nr;
    if (count == 1 && segments[0].b == nr) {
      pack_line_panel(x, g, shifts, taps, segments[0], panel);
      continue;
    }
    for (int64_t r = 0; r < kc; ++r) {
      const Tap& t = taps[std::size_t(r)];
      const Shift& shift = shifts[std::size_t(t.kk)];
      PanelRow v = zero_row();
      for (int s = 0; s < count; ++s) {
        const Segment& seg = segments[s];
        const int64_t it = g.read_at(0, seg.t + shift.at[0]);
        const int64_t iy = g.read_at(1, seg.y + shift.at[1]);
        if (it < 0 || iy < 0) continue;
        const float* row_ptr = x + t.channel + (it * g.in[1] + iy) * g.in[2];
        v = put_segment(v, row_ptr, g.in[2], seg.ox_a + shift.at[2], seg.a, seg.b, g.replicate);
      }
      store_row(v, panel + r * nr);
    }
  }
}

// fp32: the patch matrix packed straight from the input, block by block as sgemm asks (implicit
// GEMM: the weights packed once per call, no column buffer). A stride-1 last axis (every conv
// of the video VAEs but their downsamplers) a panel at a time; others a patch row at a time.
sgemm::PackB implicit_patches(const float* x, const Geometry& g) {
  constexpr int64_t nr = sgemm::kNr;
  if (g.s[2] == 1) {
    std::vector<Shift> shifts(std::size_t(g.k_vol()));  // each tap's, once per call
    for (int64_t kk = 0; kk < g.k_vol(); ++kk)
      for (int a = 0; a < 3; ++a) shifts[std::size_t(kk)].at[a] = g.shift(a, kk);
    return [x, g, shifts](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
      pack_panels(x, g, shifts, k0, kc, n0, nc, dst);
    };
  }
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
