// exp over an array of doubles in place, eight at a time where the build targets AVX-512 and four
// where it targets AVX2: glibc's vector exp (libmvec, within 1 ulp like the scalar exp; the
// reference links it). The softmax of every attention layer spends most of its time here (1.7e9
// calls in one SDXL UNet call at 1024^2).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
extern "C" __m256d _ZGVdN4v_exp(__m256d);  // glibc's libmvec, AVX2 variant of exp
#endif
#if defined(__AVX512F__)
extern "C" __m512d _ZGVeN8v_exp(__m512d);  // its AVX-512 variant
#endif

namespace tp::ref {

inline void exp_in_place(double* v, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 8 <= n; i += 8) _mm512_storeu_pd(v + i, _ZGVeN8v_exp(_mm512_loadu_pd(v + i)));
#endif
#if defined(__AVX2__)
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(v + i, _ZGVdN4v_exp(_mm256_loadu_pd(v + i)));
#endif
  for (; i < n; ++i) v[i] = std::exp(v[i]);
}

}  // namespace tp::ref
