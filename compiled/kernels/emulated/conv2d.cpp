// Channels-last conv2d: patches gathered row block by row block (each tap is a contiguous run
// of Cin values), then one GEMM against [Cout][ky][kx][Cin] weights. A fused nearest 2x
// upsample is folded into the gather: the upsampled input is never materialized.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "harness/core/transpose.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tp::compiled::emulated {
namespace {

constexpr int64_t kPatchBudget = 1 << 21;  // floats in the patch buffer

// x rounded to f16 and back, to nearest even: round_to(kF16, x), inline (F16C where built for).
inline float round_to_f16(float x) {
#if defined(__F16C__)
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT)));
#else
  return round_to(DType::kF16, x);
#endif
}

int64_t source_index(int64_t i, int64_t extent, Upsample up) {
  switch (up) {
    case Upsample::kNone:
      return i;
    case Upsample::kNearest2x:
      return i / 2;
    case Upsample::kNearest2xOffByOne:
      return std::min((i + 1) / 2, extent - 1);
  }
  return i;
}

#if defined(__AVX512F__)
// One full panel of 16 output positions when every tap's channel run is whole 16-blocks: each
// 16 x 16 block (16 positions' runs of 16 channels) is loaded a position per register,
// transposed, and stored a channel per row of the panel.
void pack_panel16(const float* in, int64_t h, int64_t w, int64_t ci, int64_t kw,
                  const Conv2dWindow& a, Upsample up, int64_t wo, int64_t hin, int64_t win,
                  int64_t k0, int64_t kc, int64_t q0, float* panel) {
  thread_local std::vector<float> zeros;
  if (int64_t(zeros.size()) < ci) zeros.assign(std::size_t(ci), 0.0f);
  const float* src[16];
  for (int64_t kk = 0; kk < kc;) {
    const int64_t tap = (k0 + kk) / ci, c0 = (k0 + kk) % ci, run = std::min(ci - c0, kc - kk);
    for (int64_t j = 0; j < 16; ++j) {
      const int64_t q = q0 + j, oy = q / wo, ox = q % wo;
      const int64_t iy = oy * a.stride - a.pad_top + tap / kw,
                    ix = ox * a.stride - a.pad_left + tap % kw;
      src[j] = iy < 0 || iy >= hin || ix < 0 || ix >= win
                   ? zeros.data()
                   : in + (source_index(iy, h, up) * w + source_index(ix, w, up)) * ci + c0;
    }
    for (int64_t c = 0; c < run; c += 16) {
      __m512 block[16];
      for (int64_t j = 0; j < 16; ++j) block[j] = _mm512_loadu_ps(src[j] + c);
      simd::transpose16(block);
      for (int64_t i = 0; i < 16; ++i) _mm512_storeu_ps(panel + (kk + c + i) * 16, block[i]);
    }
    kk += run;
  }
}
#endif

// Patches of one channels-last image as sgemm's B (implicit GEMM, fp32 accumulation): B(kk, q)
// with kk = (ky*kw + kx)*ci + c and q = oy*wo + ox is the (upsampled) input at that tap, or 0
// in the padding. Each position's taps are runs of ci contiguous values.
sgemm::PackB channels_last_patches(const float* in, int64_t h, int64_t w, int64_t ci, int64_t kw,
                                   const Conv2dWindow& a, Upsample up, int64_t wo) {
  const int64_t hin = up == Upsample::kNone ? h : 2 * h, win = up == Upsample::kNone ? w : 2 * w;
  return [=](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
    constexpr int64_t nr = sgemm::kNr;
    for (int64_t j0 = 0; j0 < nc; j0 += nr) {
      float* panel = dst + (j0 / nr) * kc * nr;
      const int64_t cols = std::min(nr, nc - j0);
#if defined(__AVX512F__)
      if (cols == 16 && nr == 16 && ci % 16 == 0 && k0 % 16 == 0 && kc % 16 == 0) {
        pack_panel16(in, h, w, ci, kw, a, up, wo, hin, win, k0, kc, n0 + j0, panel);
        continue;
      }
#endif
      if (cols < nr) std::fill(panel, panel + kc * nr, 0.0f);
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t q = n0 + j0 + j, oy = q / wo, ox = q % wo;
        for (int64_t kk = 0; kk < kc;) {
          const int64_t tap = (k0 + kk) / ci, c0 = (k0 + kk) % ci, run = std::min(ci - c0, kc - kk);
          const int64_t iy = oy * a.stride - a.pad_top + tap / kw,
                        ix = ox * a.stride - a.pad_left + tap % kw;
          float* out = panel + kk * nr + j;
          if (iy < 0 || iy >= hin || ix < 0 || ix >= win) {
            for (int64_t c = 0; c < run; ++c) out[c * nr] = 0.0f;
          } else {
            const float* src =
                in + (source_index(iy, h, up) * w + source_index(ix, w, up)) * ci + c0;
            for (int64_t c = 0; c < run; ++c) out[c * nr] = src[c];
          }
          kk += run;
        }
      }
    }
  };
}

// The conv's epilogue on [pixels, co] sums: times the fp8 weights' per-channel scale, then plus
// the bias, each where given.
void scale_and_shift(float* c, int64_t pixels, int64_t co, const float* scale, const float* shift) {
  if (scale == nullptr && shift == nullptr) return;
#pragma omp parallel for schedule(static) if (pixels * co >= kParallelElements)
  for (int64_t q = 0; q < pixels; ++q)
    for (int64_t o = 0; o < co; ++o) {
      float v = c[q * co + o];
      if (scale) v = v * scale[o];
      if (shift) v = v + shift[o];
      c[q * co + o] = v;
    }
}

// Few output channels (a decoder's conv_out to RGB): each output pixel summed directly over its
// taps and channels, eight channel lanes at a time, where a GEMM would pad the channels to a
// full tile and pack every patch for three uses. fp32 sums (lane partials, then the lanes).
constexpr int64_t kDirectMaxChannels = 8;

void direct_conv(const float* in, int64_t h, int64_t w, int64_t ci, const float* weight, int64_t co,
                 int64_t kh, int64_t kw, const Conv2dWindow& a, Upsample up, int64_t ho, int64_t wo,
                 float* out) {
  const int64_t hin = up == Upsample::kNone ? h : 2 * h, win = up == Upsample::kNone ? w : 2 * w;
  const int64_t k = kh * kw * ci, lanes_end = ci / 8 * 8;
#pragma omp parallel for schedule(static) if (co * k * ho * wo >= kParallelMacs)
  for (int64_t oy = 0; oy < ho; ++oy)
    for (int64_t ox = 0; ox < wo; ++ox) {
      float part[kDirectMaxChannels][8] = {};
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t iy = oy * a.stride - a.pad_top + ky, ix = ox * a.stride - a.pad_left + kx;
          if (iy < 0 || iy >= hin || ix < 0 || ix >= win) continue;
          const float* src = in + (source_index(iy, h, up) * w + source_index(ix, w, up)) * ci;
          const float* tap = weight + (ky * kw + kx) * ci;
          for (int64_t o = 0; o < co; ++o) {
            const float* wt = tap + o * k;
            for (int64_t c0 = 0; c0 < lanes_end; c0 += 8)
              for (int64_t l = 0; l < 8; ++l) part[o][l] += src[c0 + l] * wt[c0 + l];
            for (int64_t c = lanes_end; c < ci; ++c) part[o][c % 8] += src[c] * wt[c];
          }
        }
      for (int64_t o = 0; o < co; ++o) {
        const float* p = part[o];
        out[(oy * wo + ox) * co + o] =
            ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
      }
    }
}

}  // namespace

void gemm_nt(const float* a, const float* w, int64_t m, int64_t n, int64_t k, DType accumulation,
             float* out) {
  if (accumulation == DType::kF32) {  // W's rows are B's columns, read in order as packed
    sgemm::gemm(m, n, k, {a, k, 1}, sgemm::pack_strided({w, 1, k}), {out, n, 1});
    return;
  }
  TP_CHECK(accumulation == DType::kF16, "accumulation is f32 or f16");
  // Each dot product in the order t = 0..k-1, every step rounded to f16: kChains of them at once,
  // independent chains, so that one's rounding waits while the others compute.
  constexpr int64_t kChains = 8;
#pragma omp parallel for schedule(static) if (m * n * k >= kParallelMacs)
  for (int64_t i = 0; i < m; ++i) {
    const float* x = a + i * k;
    int64_t j = 0;
    for (; j + kChains <= n; j += kChains) {
      float s[kChains] = {};
      for (int64_t t = 0; t < k; ++t)
#pragma GCC unroll 8
        for (int64_t q = 0; q < kChains; ++q)
          s[q] = round_to_f16(std::fma(x[t], w[(j + q) * k + t], s[q]));
      for (int64_t q = 0; q < kChains; ++q) out[i * n + j + q] = s[q];
    }
    for (; j < n; ++j) {
      float s = 0;
      for (int64_t t = 0; t < k; ++t) s = round_to_f16(std::fma(x[t], w[j * k + t], s));
      out[i * n + j] = s;
    }
  }
}

Tensor conv2d(const Tensor& x, const PreparedParam& weight, const PreparedParam* bias,
              const Conv2dWindow& a, Upsample upsample, DType accumulation) {
  const int64_t b = x.dim(0), h = x.dim(1), w = x.dim(2), ci = x.dim(3);
  const int64_t hin = upsample == Upsample::kNone ? h : 2 * h,
                win = upsample == Upsample::kNone ? w : 2 * w;
  const int64_t co = weight.shape[0];
  const int64_t kh = weight.shape.size() == 4 ? weight.shape[2] : 1,
                kw = weight.shape.size() == 4 ? weight.shape[3] : 1;
  const int64_t k = kh * kw * ci;
  TP_CHECK(weight.count() == co * k, weight.key + ": weight does not match the input's channels");
  const int64_t ho = (hin + a.pad_top + a.pad_bottom - kh) / a.stride + 1;
  const int64_t wo = (win + a.pad_left + a.pad_right - kw) / a.stride + 1;
  Tensor out = Tensor::uninitialized(DType::kF32, {b, ho, wo, co});
  const float* in = x.data<float>();
  float* dst = out.data<float>();
  const float* scale = weight.scales.empty() ? nullptr : weight.scales.data();
  const float* shift = bias ? bias->values.data() : nullptr;
  const ParamFloats weights(weight);
  if (accumulation == DType::kF32) {
    for (int64_t n = 0; n < b; ++n) {
      const float* image = in + n * h * w * ci;
      float* image_out = dst + n * ho * wo * co;
      if (co <= kDirectMaxChannels) {
        direct_conv(image, h, w, ci, weights.data(), co, kh, kw, a, upsample, ho, wo, image_out);
      } else {
        // [co, k] weights times the patches, stored transposed into the [ho*wo, co] output; a
        // bias without scales is added after the sum, as the pass below does.
        sgemm::gemm(co, ho * wo, k, {weights.data(), k, 1},
                    channels_last_patches(image, h, w, ci, kw, a, upsample, wo), {image_out, 1, co},
                    scale == nullptr ? shift : nullptr);
        if (scale == nullptr) continue;
      }
      scale_and_shift(image_out, ho * wo, co, scale, shift);
    }
    return out;
  }
  const bool direct = kh == 1 && kw == 1 && a.stride == 1 && upsample == Upsample::kNone &&
                      a.pad_top == 0 && a.pad_left == 0 && a.pad_bottom == 0 && a.pad_right == 0;
  const int64_t rows =
      std::max<int64_t>(1, std::min(ho, kPatchBudget / std::max<int64_t>(1, wo * k)));
  std::vector<float> patches(direct ? 0 : std::size_t(rows * wo * k));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t y0 = 0; y0 < ho; y0 += rows) {
      const int64_t r = std::min(rows, ho - y0);
      const int64_t p = r * wo;
      const float* a_rows = in + (n * h * w + y0 * wo) * ci;
      if (!direct) {
#pragma omp parallel for schedule(static) if (p * k >= kParallelElements)
        for (int64_t q = 0; q < p; ++q) {
          const int64_t oy = y0 + q / wo, ox = q % wo;
          float* row = patches.data() + q * k;
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              float* tap = row + (ky * kw + kx) * ci;
              const int64_t iy = oy * a.stride - a.pad_top + ky,
                            ix = ox * a.stride - a.pad_left + kx;
              if (iy < 0 || iy >= hin || ix < 0 || ix >= win) {
                std::fill(tap, tap + ci, 0.0f);
                continue;
              }
              const int64_t sy = source_index(iy, h, upsample), sx = source_index(ix, w, upsample);
              std::memcpy(tap, in + ((n * h + sy) * w + sx) * ci, std::size_t(ci) * sizeof(float));
            }
        }
        a_rows = patches.data();
      }
      float* c = dst + (n * ho + y0) * wo * co;
      gemm_nt(a_rows, weights.data(), p, co, k, accumulation, c);
      scale_and_shift(c, p, co, scale, shift);
    }
  return out;
}

}  // namespace tp::compiled::emulated
