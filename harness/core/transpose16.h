// A 16x16 block of floats transposed in AVX-512 registers: sgemm's stores into a C kept
// transposed (channels-last outputs) and the emulation's patch packers use it.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace tp::simd {

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

}  // namespace tp::simd

#endif
