// Float matrices transposed: a 16x16 block in AVX-512 registers (the emulation's patch packers
// use it directly); a panel of 16 columns from 16 row sources (sgemm's and the conv's packers);
// and any block through such 16x16 blocks and element by element at its edges (sgemm's stores
// into a C kept transposed, channels-last copies of planar values, the executor's layout
// changes).
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tp::simd {

#if defined(__AVX512F__)

// The full-mask forms of the shuffles: the same instructions, without GCC 12's
// _mm512_undefined_ps (whose self-initialization warns as maybe-uninitialized once inlined).
inline __m512 unpacklo(__m512 a, __m512 b) { return _mm512_mask_unpacklo_ps(a, 0xffff, a, b); }
inline __m512 unpackhi(__m512 a, __m512 b) { return _mm512_mask_unpackhi_ps(a, 0xffff, a, b); }
template <int kImm>
inline __m512 shuffle_lanes(__m512 a, __m512 b) {
  return _mm512_mask_shuffle_f32x4(a, 0xffff, a, b, kImm);
}

// Rows r0..r15 of a 16x16 block become its columns (four rounds of shuffles, in registers).
inline __attribute__((always_inline)) void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = unpacklo(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = unpackhi(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + q], 128-bit lane L: column 4L + q, rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int q = 0; q < 4; ++q) {
    const __m512 x0 = shuffle_lanes<0x88>(r[q], r[4 + q]);  // lanes 0, 2 of each
    const __m512 x1 = shuffle_lanes<0xdd>(r[q], r[4 + q]);  // lanes 1, 3 of each
    const __m512 y0 = shuffle_lanes<0x88>(r[8 + q], r[12 + q]);
    const __m512 y1 = shuffle_lanes<0xdd>(r[8 + q], r[12 + q]);
    t[q] = shuffle_lanes<0x88>(x0, y0);
    t[4 + q] = shuffle_lanes<0x88>(x1, y1);
    t[8 + q] = shuffle_lanes<0xdd>(x0, y0);
    t[12 + q] = shuffle_lanes<0xdd>(x1, y1);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// A panel of 16 columns from 16 sources of `len` contiguous floats each (a null source is a
// column of zeros): out[i * 16 + j] = src[j][i], by 16 x 16 blocks in registers. sgemm packs A
// from 16 rows with it, the emulation's conv packs B from 16 positions' channel runs.
inline void panel_from_sources(const float* const (&src)[16], int64_t len, float* out) {
  for (int64_t i0 = 0; i0 < len; i0 += 16) {
    const int64_t n = len - i0 < 16 ? len - i0 : 16;
    const __mmask16 mask = __mmask16((1u << n) - 1);
    __m512 block[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      block[j] = src[j] ? _mm512_maskz_loadu_ps(mask, src[j] + i0) : _mm512_setzero_ps();
    transpose16(block);
    for (int64_t i = 0; i < n; ++i) _mm512_storeu_ps(out + (i0 + i) * 16, block[i]);
  }
}
#endif

// src's [rows, cols] block (its rows `src_ld` floats apart) into dst as [cols, rows] (rows
// `dst_ld` apart): whole 16x16 blocks in registers where the build has AVX-512, the rest element
// by element. A copy: every bit pattern moves unchanged.
inline void transpose_floats(const float* src, int64_t src_ld, float* dst, int64_t dst_ld,
                             int64_t rows, int64_t cols) {
  int64_t r0 = 0, c0 = 0;
#if defined(__AVX512F__)
  for (; r0 + 16 <= rows; r0 += 16)
    for (c0 = 0; c0 + 16 <= cols; c0 += 16) {
      __m512 block[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) block[i] = _mm512_loadu_ps(src + (r0 + i) * src_ld + c0);
      transpose16(block);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) _mm512_storeu_ps(dst + (c0 + j) * dst_ld + r0, block[j]);
    }
#endif
  // What the blocks left: columns past c0 of rows before r0, then every column of the rest.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < r0 ? c0 : 0; c < cols; ++c) dst[c * dst_ld + r] = src[r * src_ld + c];
}

}  // namespace tp::simd
