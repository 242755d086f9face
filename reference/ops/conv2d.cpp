// Conv2d. fp32: implicit GEMM (sgemm packs the patches straight from the input), or direct
// sums for a handful of output channels. fp64: im2col + Eigen GEMM, in blocks of output rows so
// the column buffer stays small at any resolution; 1x1 stride-1 convs skip im2col. Matches
// torch.nn.functional.conv2d with explicit (top, bottom, left, right) zero padding, which also
// covers diffusers' Downsample2D (pad (0,1,0,1) then stride 2) and TAESD's symmetric stride-2
// convs.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "reference/ops/ops.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tp::ref {
namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using StridedRows = Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>>;

// Element budget of the im2col buffer: large enough that the GEMM's N dimension stays wide,
// small enough to stay in the L3 cache.
constexpr int64_t kColumnBudget = 1 << 21;

// cols[(c*kh + ky)*kw + kx][r*wo + ox] = x[c][(y0+r)*s - pt + ky][ox*s - pl + kx], or 0.
template <class T>
void im2col_rows(const T* x, int64_t cin, int64_t h, int64_t w, int64_t kh, int64_t kw,
                 const Conv2dWindow& a, int64_t y0, int64_t rows, int64_t wo, T* cols) {
  const int64_t np = rows * wo;
#pragma omp parallel for schedule(static) if (cin * kh * kw * np >= kParallelElements)
  for (int64_t k = 0; k < cin * kh * kw; ++k) {
    const int64_t c = k / (kh * kw), ky = (k / kw) % kh, kx = k % kw;
    T* dst = cols + k * np;
    const T* plane = x + c * h * w;
    for (int64_t r = 0; r < rows; ++r) {
      T* out = dst + r * wo;
      const int64_t iy = (y0 + r) * a.stride - a.pad_top + ky;
      if (iy < 0 || iy >= h) {
        std::fill(out, out + wo, T(0));
        continue;
      }
      const T* in = plane + iy * w;
      if (a.stride == 1) {
        // Valid ox: 0 <= ox - pl + kx < w.
        const int64_t lo = std::clamp<int64_t>(a.pad_left - kx, 0, wo);
        const int64_t hi = std::clamp<int64_t>(w + a.pad_left - kx, lo, wo);
        std::fill(out, out + lo, T(0));
        std::memcpy(out + lo, in + lo - a.pad_left + kx, std::size_t(hi - lo) * sizeof(T));
        std::fill(out + hi, out + wo, T(0));
      } else {
        for (int64_t ox = 0; ox < wo; ++ox) {
          const int64_t ix = ox * a.stride - a.pad_left + kx;
          out[ox] = (ix >= 0 && ix < w) ? in[ix] : T(0);
        }
      }
    }
  }
}

#if defined(__AVX512F__)
// A full panel of a stride-1 conv on one output row, one masked 16-float load per row k: lanes
// whose input column falls in the padding are masked off (not read) and stored as zeros, rows in
// the padding stored as zeros. (The SD-VAE's 32- and 64-wide images leave few panels clear of the
// padding; this path packs them all without branching per lane.)
void pack_row_panel(const float* x, int64_t h, int64_t w, int64_t kh, int64_t kw,
                    const Conv2dWindow& a, int64_t oy, int64_t ox, int64_t k0, int64_t kc,
                    float* out) {
  static_assert(sgemm::kNr == 16, "one 16-float vector per panel row");
  int64_t c = k0 / (kh * kw), ky = (k0 / kw) % kh, kx = k0 % kw;
  for (int64_t kk = 0; kk < kc; ++kk, out += 16) {
    const int64_t iy = oy - a.pad_top + ky, ix = ox - a.pad_left + kx;
    __m512 v = _mm512_setzero_ps();
    if (iy >= 0 && iy < h) {
      // Lanes j with 0 <= ix + j < w.
      const int64_t lo = std::clamp<int64_t>(-ix, 0, 16), hi = std::clamp<int64_t>(w - ix, lo, 16);
      const auto mask = __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
      // The address of lane 0 may lie outside x when lo > 0; masked lanes are never read.
      const auto lane0 = reinterpret_cast<const float*>(reinterpret_cast<std::uintptr_t>(x) +
                                                        std::uintptr_t((c * h + iy) * w + ix) * 4u);
      v = _mm512_maskz_loadu_ps(mask, lane0);
    }
    _mm512_storeu_ps(out, v);
    if (++kx == kw) {
      kx = 0;
      if (++ky == kh) ky = 0, ++c;
    }
  }
}
#endif

// Patches of one image as sgemm's B (implicit GEMM): B(k, n) with k = (c*kh + ky)*kw + kx and
// n = oy*wo + ox is x[c][oy*s - pt + ky][ox*s - pl + kx], or 0 in the padding. A panel of
// kNr outputs on one row of a stride-1 conv reads a contiguous run of the input row.
sgemm::PackB conv_patches(const float* x, int64_t h, int64_t w, int64_t kh, int64_t kw,
                          const Conv2dWindow& a, int64_t wo) {
  return [=](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
    constexpr int64_t nr = sgemm::kNr;
    for (int64_t j0 = 0; j0 < nc; j0 += nr) {
      float* out = dst + (j0 / nr) * kc * nr;
      const int64_t cols = std::min(nr, nc - j0), n = n0 + j0, oy = n / wo, ox = n % wo;
      const bool one_row = ox + cols <= wo;
#if defined(__AVX512F__)
      if (one_row && cols == nr && a.stride == 1) {
        pack_row_panel(x, h, w, kh, kw, a, oy, ox, k0, kc, out);
        continue;
      }
#endif
      // (c, ky, kx) of row k0, stepped without divisions.
      int64_t c = k0 / (kh * kw), ky = (k0 / kw) % kh, kx = k0 % kw;
      for (int64_t kk = 0; kk < kc; ++kk, out += nr) {
        const float* plane = x + c * h * w;
        const int64_t iy = oy * a.stride - a.pad_top + ky, ix = ox * a.stride - a.pad_left + kx;
        if (one_row && a.stride == 1 && cols == nr && iy >= 0 && iy < h && ix >= 0 &&
            ix + nr <= w) {
          std::memcpy(out, plane + iy * w + ix, nr * sizeof(float));
        } else if (one_row && (iy < 0 || iy >= h)) {  // a padding row
          std::fill(out, out + nr, 0.0f);
        } else if (one_row && a.stride == 1) {  // a run of one input row cut by the padding
          const int64_t lo = std::clamp<int64_t>(-ix, 0, cols);
          const int64_t hi = std::clamp<int64_t>(w - ix, lo, cols);
          std::fill(out, out + lo, 0.0f);
          std::copy(plane + iy * w + ix + lo, plane + iy * w + ix + hi, out + lo);
          std::fill(out + hi, out + nr, 0.0f);
        } else if (one_row) {  // a strided run of one input row
          for (int64_t j = 0; j < nr; ++j) {
            const int64_t xx = ix + j * a.stride;
            out[j] = j < cols && xx >= 0 && xx < w ? plane[iy * w + xx] : 0.0f;
          }
        } else {  // the panel wraps onto the next output row
          for (int64_t j = 0; j < nr; ++j) {
            const int64_t q = n + j, y = (q / wo) * a.stride - a.pad_top + ky,
                          xx = (q % wo) * a.stride - a.pad_left + kx;
            out[j] = j < cols && y >= 0 && y < h && xx >= 0 && xx < w ? plane[y * w + xx] : 0.0f;
          }
        }
        if (++kx == kw) {
          kx = 0;
          if (++ky == kh) ky = 0, ++c;
        }
      }
    }
  };
}

// Few output channels (a decoder's conv_out to RGB): a GEMM would pad them to a full tile and
// pack every patch for 3 uses, so sum directly, one output row at a time: each tap adds a
// weight times a shifted input row into the row's accumulators (vectorized along x).
constexpr int64_t kDirectMaxChannels = 8;

void direct_conv(const float* x, int64_t cin, int64_t h, int64_t w, const float* weight,
                 int64_t cout, int64_t kh, int64_t kw, const float* bias, const Conv2dWindow& a,
                 int64_t ho, int64_t wo, float* out) {
  const int threads = sgemm::threads_for(cout * cin * kh * kw * ho * wo);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    std::vector<float> acc(std::size_t(cout * wo));
#pragma omp for schedule(static)
    for (int64_t oy = 0; oy < ho; ++oy) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t c = 0; c < cin; ++c)
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = oy - a.pad_top + ky;
          if (iy < 0 || iy >= h) continue;
          const float* row = x + (c * h + iy) * w;
          for (int64_t kx = 0; kx < kw; ++kx) {
            // Valid ox: 0 <= ox - pl + kx < w.
            const int64_t lo = std::clamp<int64_t>(a.pad_left - kx, 0, wo);
            const int64_t hi = std::clamp<int64_t>(w + a.pad_left - kx, lo, wo);
            const float* in = row - a.pad_left + kx;
            for (int64_t co = 0; co < cout; ++co) {
              const float wt = weight[((co * cin + c) * kh + ky) * kw + kx];
              float* dst = acc.data() + co * wo;
              for (int64_t ox = lo; ox < hi; ++ox) dst[ox] += wt * in[ox];
            }
          }
        }
      for (int64_t co = 0; co < cout; ++co)
        for (int64_t ox = 0; ox < wo; ++ox)
          out[(co * ho + oy) * wo + ox] = acc[std::size_t(co * wo + ox)] + (bias ? bias[co] : 0.0f);
    }
  }
}

}  // namespace

template <class T>
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor* bias, const Conv2dWindow& a) {
  const int64_t batch = x.dim(0), cin = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int64_t cout = weight.dim(0), kh = weight.dim(2), kw = weight.dim(3);
  TP_CHECK(weight.dim(1) == cin, "conv input has " + std::to_string(cin) + " channels, weight " +
                                     shape_string(weight.shape()));
  const int64_t ho = conv_out_size(h, a.pad_top, a.pad_bottom, kh, a.stride);
  const int64_t wo = conv_out_size(w, a.pad_left, a.pad_right, kw, a.stride);
  TP_CHECK(ho > 0 && wo > 0, "conv input " + shape_string(x.shape()) + " too small");
  Tensor out = Tensor::uninitialized(dtype_of<T>(), {batch, cout, ho, wo});
  const int64_t k = cin * kh * kw, p = ho * wo;
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t b = 0; b < batch; ++b) {
      const float* xb = x.data<float>() + b * cin * h * w;
      if (cout <= kDirectMaxChannels && a.stride == 1) {
        direct_conv(xb, cin, h, w, weight.data<float>(), cout, kh, kw,
                    bias ? bias->data<float>() : nullptr, a, ho, wo,
                    out.data<float>() + b * cout * p);
        continue;
      }
      sgemm::gemm(cout, p, k, {weight.data<float>(), k, 1}, conv_patches(xb, h, w, kh, kw, a, wo),
                  {out.data<float>() + b * cout * p, p, 1},
                  bias != nullptr ? bias->data<float>() : nullptr);
    }
    return out;
  }
  Eigen::Map<const RowMatrix<T>> wm(weight.data<T>(), cout, k);
  const bool pointwise = kh == 1 && kw == 1 && a.stride == 1 && a.pad_top == 0 &&
                         a.pad_bottom == 0 && a.pad_left == 0 && a.pad_right == 0;
  const int64_t rows_per_block =
      std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(1, k * wo), 1, ho);
  std::vector<T> cols(pointwise ? 0 : std::size_t(k * rows_per_block * wo));
  for (int64_t b = 0; b < batch; ++b) {
    const T* xb = x.data<T>() + b * cin * h * w;
    T* ob = out.data<T>() + b * cout * p;
    if (pointwise) {
      Eigen::Map<RowMatrix<T>>(ob, cout, p).noalias() =
          wm * Eigen::Map<const RowMatrix<T>>(xb, cin, p);
    } else {
      for (int64_t y0 = 0; y0 < ho; y0 += rows_per_block) {
        const int64_t rows = std::min(rows_per_block, ho - y0), np = rows * wo;
        im2col_rows(xb, cin, h, w, kh, kw, a, y0, rows, wo, cols.data());
        StridedRows<T>(ob + y0 * wo, cout, np, Eigen::OuterStride<>(p)).noalias() =
            wm * Eigen::Map<const RowMatrix<T>>(cols.data(), k, np);
      }
    }
    if (bias != nullptr) {
      const T* bv = bias->data<T>();
#pragma omp parallel for schedule(static) if (cout * p >= kParallelElements)
      for (int64_t c = 0; c < cout; ++c) {
        T* row = ob + c * p;
        for (int64_t i = 0; i < p; ++i) row[i] += bv[c];
      }
    }
  }
  return out;
}

template Tensor conv2d<float>(const Tensor&, const Tensor&, const Tensor*, const Conv2dWindow&);
template Tensor conv2d<double>(const Tensor&, const Tensor&, const Tensor*, const Conv2dWindow&);

}  // namespace tp::ref
