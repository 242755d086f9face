// Blocking (Goto's scheme, roles as below): A is packed whole, once per call, into panels of
// kMr rows along K; each thread owns a range of N and packs it a block of columns at a time
// (all of K, up to 4 MiB, in L3), then sweeps it against A in strips of kMc rows and blocks of
// kKc: a B micro-panel (kKc x kNr) is reused from L1/L2 across the A panels of a strip, which
// stay in L2. Each C element of a K block is summed in fp32 (FMA, in K order) kSubK products
// at a time, the sub-sums added in order; the block's sum is added to the strip's sums block by
// block, in a buffer whose rows do not share cache sets, and the finished strip copied to C. A
// long K (a feed-forward's 8960) takes Goto's own order instead: see run_columns_long_k.
#include "harness/core/sgemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "harness/core/parallel.h"
#include "harness/core/transpose.h"

#if defined(__AVX2__) && defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tp::sgemm {
namespace {

// kKc and kMc measured on a Zen 4 VM (docs/benchmarks.md): 512 x 96 beat 256 x 144 by 5-10% on
// the SD-VAE's conv shapes with both micro-kernels (half as many passes over C).
constexpr int64_t kKc = 512;  // K block: a B micro-panel of 32 KiB
constexpr int64_t kMc = 96;   // A rows per block: 192 KiB at kKc, in L2
// Each element is summed in registers over kSubK products at a time, the sub-sums added in order:
// a sum of 512 products in one accumulator put the SD-VAE decode at 2.8e-6 from fp64, sub-sums
// of 128 at 1.6e-6, of 64 at 1.3e-6 (PyTorch's oneDNN: 1.7e-6; docs/benchmarks.md).
constexpr int64_t kSubK = 64;
constexpr int64_t kNc = 1024;  // B columns per block at most: a kMc x kNc strip of C in L2
constexpr int64_t kBBudget = int64_t(1) << 20;  // floats of one thread's packed B (4 MiB, in L3)
// Past this K a B block of all K would hold fewer than 256 columns (run_columns_long_k).
constexpr int64_t kLongK = kBBudget / 256;
// Floats of one thread's buffer of C sums on the long-K path (8 MiB: both threads' and their B
// blocks stay in a 32 MiB L3); a larger C block is summed in C itself.
constexpr int64_t kCBudget = int64_t(1) << 21;

// The bias a tile adds on its last K block: per row and/or per column of the tile, or none.
struct Bias {
  const float* row = nullptr;
  const float* col = nullptr;
};

// Writes a finished kMr x kNr tile: C = (accumulate ? C : 0) + tile (+ bias per row), for the
// first mr rows and nr columns.
void store_tile(const float* tile, int64_t mr, int64_t nr, float* c, int64_t rs, int64_t cs,
                bool accumulate, const Bias& bias) {
  // In C's memory order: rows inner when C is stored transposed (rs == 1).
  const bool columns_outer = rs == 1;
  for (int64_t outer = 0; outer < (columns_outer ? nr : mr); ++outer)
    for (int64_t inner = 0; inner < (columns_outer ? mr : nr); ++inner) {
      const int64_t r = columns_outer ? inner : outer, j = columns_outer ? outer : inner;
      float* out = c + r * rs + j * cs;
      float v = accumulate ? *out + tile[r * kNr + j] : tile[r * kNr + j];
      if (bias.row != nullptr) v += bias.row[r];
      if (bias.col != nullptr) v += bias.col[j];
      *out = v;
    }
}

#if defined(__AVX512F__) || defined(__AVX2__) && defined(__FMA__)
// C's rows are often a power-of-two apart (one output channel of an image): they share cache
// sets and miss; a micro-kernel fetches its tile's lines before its K loop runs.
void prefetch_tile(const float* c, int64_t rs, int64_t cs, int64_t mr, int64_t nr) {
  if (rs == 1) {  // stored transposed: a line per column
    for (int64_t j = 0; j < nr; ++j)
      _mm_prefetch(reinterpret_cast<const char*>(c + j * cs), _MM_HINT_T0);
  } else {
    for (int64_t r = 0; r < mr; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * rs), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * rs + (nr - 1) * cs), _MM_HINT_T0);
    }
  }
}
#endif

#if defined(__AVX512F__)
// 16 x 16 micro-kernel: 16 accumulators, one B vector per step and one A broadcast per FMA
// (folded into it as a memory operand).
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t rs, int64_t cs,
                  int64_t mr, int64_t nr, bool accumulate, const Bias& bias) {
  prefetch_tile(c, rs, cs, mr, nr);
  __m512 acc[kMr] = {};  // set before use; initialized for the compiler's sake (kc >= 1)
  alignas(64) float partial[kMr * kNr];  // the finished sub-blocks' sum
  for (int64_t k0 = 0; k0 < kc; k0 += kSubK) {
#pragma GCC unroll 16
    for (int64_t r = 0; r < kMr; ++r) acc[r] = _mm512_setzero_ps();
    const int64_t len = std::min(kSubK, kc - k0);
#pragma GCC unroll 4
    for (int64_t k = 0; k < len; ++k) {
      const __m512 b0 = _mm512_loadu_ps(b);
#pragma GCC unroll 16
      for (int64_t r = 0; r < kMr; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), b0, acc[r]);
      a += kMr;
      b += kNr;
    }
    if (k0 + len < kc) {
#pragma GCC unroll 16
      for (int64_t r = 0; r < kMr; ++r)
        _mm512_store_ps(
            partial + r * kNr,
            k0 == 0 ? acc[r] : _mm512_add_ps(_mm512_load_ps(partial + r * kNr), acc[r]));
    } else if (k0 > 0) {
#pragma GCC unroll 16
      for (int64_t r = 0; r < kMr; ++r)
        acc[r] = _mm512_add_ps(_mm512_load_ps(partial + r * kNr), acc[r]);
    }
  }
  if (mr == kMr && nr == kNr && (cs == 1 || rs == 1)) {
    // In C's memory order: a C row per tile row, or (C stored transposed) a tile column.
    const bool transposed = cs != 1;
    if (transposed) simd::transpose16(acc);
    const __m512 row_bias =
        transposed && bias.row != nullptr ? _mm512_loadu_ps(bias.row) : _mm512_setzero_ps();
    const __m512 col_bias =
        !transposed && bias.col != nullptr ? _mm512_loadu_ps(bias.col) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int64_t i = 0; i < kMr; ++i) {
      float* out = transposed ? c + i * cs : c + i * rs;
      __m512 v = acc[i];
      if (accumulate) v = _mm512_add_ps(_mm512_loadu_ps(out), v);
      // The same sums as store_tile: (C + tile) + row bias + column bias.
      if (bias.row != nullptr)
        v = _mm512_add_ps(v, transposed ? row_bias : _mm512_set1_ps(bias.row[i]));
      if (bias.col != nullptr)
        v = _mm512_add_ps(v, transposed ? _mm512_set1_ps(bias.col[i]) : col_bias);
      _mm512_storeu_ps(out, v);
    }
    return;
  }
  alignas(64) float tile[kMr * kNr];
#pragma GCC unroll 16
  for (int64_t r = 0; r < kMr; ++r) _mm512_store_ps(tile + r * kNr, acc[r]);
  store_tile(tile, mr, nr, c, rs, cs, accumulate, bias);
}
#elif defined(__AVX2__) && defined(__FMA__)
// Rows r0..r7 of an 8x8 block become its columns.
void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// A full tile (kMr x kNr floats) into a C stored transposed (rs == 1): column j of the tile is kMr
// contiguous floats at c + j * cs; the same sums as store_tile: (C + tile) + row bias + column
// bias.
void store_transposed(const float* tile, float* c, int64_t cs, bool accumulate, const Bias& bias) {
  // Six floats as a 4-lane and a 2-lane part (masked stores are slow on some x86 cores).
  const auto load6 = [](const float* p, __m128& lo, __m128& hi) {
    lo = _mm_loadu_ps(p);
    hi = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p + 4)));
  };
  __m128 bias_lo = _mm_setzero_ps(), bias_hi = _mm_setzero_ps();
  if (bias.row != nullptr) load6(bias.row, bias_lo, bias_hi);
  for (int half = 0; half < 2; ++half) {
    __m256 col[8];
    for (int r = 0; r < 8; ++r)
      col[r] = r < kMr ? _mm256_load_ps(tile + r * kNr + half * 8) : _mm256_setzero_ps();
    transpose8(col);
    for (int j = 0; j < 8; ++j) {
      float* out = c + (half * 8 + j) * cs;
      __m128 lo = _mm256_castps256_ps128(col[j]), hi = _mm256_extractf128_ps(col[j], 1);
      if (accumulate) {
        __m128 old_lo, old_hi;
        load6(out, old_lo, old_hi);
        lo = _mm_add_ps(old_lo, lo);
        hi = _mm_add_ps(old_hi, hi);
      }
      if (bias.row != nullptr) lo = _mm_add_ps(lo, bias_lo), hi = _mm_add_ps(hi, bias_hi);
      if (bias.col != nullptr) {
        const __m128 b = _mm_set1_ps(bias.col[half * 8 + j]);
        lo = _mm_add_ps(lo, b);
        hi = _mm_add_ps(hi, b);
      }
      _mm_storeu_ps(out, lo);
      _mm_store_sd(reinterpret_cast<double*>(out + 4), _mm_castps_pd(hi));
    }
  }
}

// 6 x 16 micro-kernel: 12 accumulators, two B vectors and one A broadcast per step.
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t rs, int64_t cs,
                  int64_t mr, int64_t nr, bool accumulate, const Bias& bias) {
  prefetch_tile(c, rs, cs, mr, nr);
  // Every loop over the tile's rows is unrolled so the accumulators stay in registers at any
  // optimization level (-O2 alone would keep them in memory: 3x slower).
  __m256 acc[kMr][2] = {};  // set before use; initialized for the compiler's sake (kc >= 1)
  alignas(32) float partial[kMr * kNr];  // the finished sub-blocks' sum
  for (int64_t k0 = 0; k0 < kc; k0 += kSubK) {
#pragma GCC unroll 6
    for (int64_t r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    const int64_t len = std::min(kSubK, kc - k0);
#pragma GCC unroll 4
    for (int64_t k = 0; k < len; ++k) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
      for (int64_t r = 0; r < kMr; ++r) {
        const __m256 ar = _mm256_broadcast_ss(a + r);
        acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
      }
      a += kMr;
      b += kNr;
    }
#pragma GCC unroll 6
    for (int64_t r = 0; r < kMr; ++r)
      for (int half = 0; half < 2; ++half) {
        float* p = partial + r * kNr + half * 8;
        if (k0 + len < kc)
          _mm256_store_ps(p,
                          k0 == 0 ? acc[r][half] : _mm256_add_ps(_mm256_load_ps(p), acc[r][half]));
        else if (k0 > 0)
          acc[r][half] = _mm256_add_ps(_mm256_load_ps(p), acc[r][half]);
      }
  }
  if (mr == kMr && nr == kNr && cs == 1) {
#pragma GCC unroll 6
    for (int64_t r = 0; r < kMr; ++r) {
      float* out = c + r * rs;
      __m256 v0 = acc[r][0], v1 = acc[r][1];
      if (accumulate) {
        v0 = _mm256_add_ps(_mm256_loadu_ps(out), v0);
        v1 = _mm256_add_ps(_mm256_loadu_ps(out + 8), v1);
      }
      if (bias.row != nullptr) {
        const __m256 br = _mm256_set1_ps(bias.row[r]);
        v0 = _mm256_add_ps(v0, br);
        v1 = _mm256_add_ps(v1, br);
      }
      if (bias.col != nullptr) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(bias.col));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(bias.col + 8));
      }
      _mm256_storeu_ps(out, v0);
      _mm256_storeu_ps(out + 8, v1);
    }
    return;
  }
  // The accumulators go through memory (a call taking their address would keep them there
  // through the K loop above).
  alignas(32) float tile[kMr * kNr];
#pragma GCC unroll 6
  for (int64_t r = 0; r < kMr; ++r) {
    _mm256_store_ps(tile + r * kNr, acc[r][0]);
    _mm256_store_ps(tile + r * kNr + 8, acc[r][1]);
  }
  if (mr == kMr && nr == kNr && rs == 1) {  // C stored transposed: a tile column is a C row
    store_transposed(tile, c, cs, accumulate, bias);
    return;
  }
  store_tile(tile, mr, nr, c, rs, cs, accumulate, bias);
}
#else
// Portable micro-kernel: the same tile and order; the compiler vectorizes the j loop.
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t rs, int64_t cs,
                  int64_t mr, int64_t nr, bool accumulate, const Bias& bias) {
  float tile[kMr * kNr] = {}, sub[kMr * kNr];
  for (int64_t k0 = 0; k0 < kc; k0 += kSubK) {
    std::fill(sub, sub + kMr * kNr, 0.0f);
    for (int64_t k = k0; k < std::min(kc, k0 + kSubK); ++k) {
      for (int64_t r = 0; r < kMr; ++r)
        for (int64_t j = 0; j < kNr; ++j) sub[r * kNr + j] += a[r] * b[j];
      a += kMr;
      b += kNr;
    }
    for (int64_t i = 0; i < kMr * kNr; ++i) tile[i] = k0 == 0 ? sub[i] : tile[i] + sub[i];
  }
  store_tile(tile, mr, nr, c, rs, cs, accumulate, bias);
}
#endif

#if defined(__AVX512F__)
// A full panel of a row-major A (16 rows, col_stride 1), or of a B whose columns are rows (x W^T),
// 16 columns at a time through a 16x16 transpose in registers: each store a whole panel row (the
// element loop below writes each line of the panel 16 times, one float at a time).
void pack_a_panel_rows(const float* src, int64_t row_stride, int64_t k, float* out) {
  static_assert(kMr == 16 && kNr == 16);
  const float* rows[16];
  for (int r = 0; r < 16; ++r) rows[r] = src + r * row_stride;
  simd::panel_from_sources(rows, k, out);
}
#endif

// A [m, k] into panels of kMr rows: dst[p * k * kMr + kk * kMr + r] = A(p * kMr + r, kk).
void pack_a(const Strided& a, int64_t m, int64_t k, float* dst, int threads) {
  const int64_t panels = (m + kMr - 1) / kMr;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < panels; ++p) {
    float* out = dst + p * k * kMr;
    const int64_t rows = std::min(kMr, m - p * kMr);
#if defined(__AVX512F__)
    if (rows == kMr && a.col_stride == 1) {
      pack_a_panel_rows(a.data + p * kMr * a.row_stride, a.row_stride, k, out);
      continue;
    }
#endif
    if (rows < kMr) std::fill(out, out + k * kMr, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = a.data + (p * kMr + r) * a.row_stride;
      for (int64_t kk = 0; kk < k; ++kk) out[kk * kMr + r] = src[kk * a.col_stride];
    }
  }
}

std::vector<float>& scratch(int which) {
  thread_local std::vector<float> buffers[3];  // packed A, packed B, C's finished sums
  return buffers[which];
}

float* grow(std::vector<float>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(std::size_t(n));
  return v.data();
}

// B columns per block when all of K is packed at once: a block of at most kBBudget floats.
int64_t column_block(int64_t k) { return std::clamp(kBBudget / k / kNr * kNr, kNr, kNc); }

// C's tiles are summed in a buffer of this thread's whose rows are an odd number of cache lines
// apart, then copied to C once finished: C's own rows are often a multiple of 4 KiB apart (a
// channel plane of an image, or channels-last pixels), so a tile's 16 rows would share one L1 set
// and miss on every K block (3-5% of a product's time with free packing, docs/design.md).
int64_t buffer_stride(int64_t nc) { return (nc + 63) / 64 * 64 + 16; }

// Rows [0, rows) and columns [0, nc) of a buffer (rows ld apart) to C at (row0, col0).
void copy_out(const float* buf, int64_t ld, int64_t rows, int64_t nc, const StridedOut& c,
              int64_t row0, int64_t col0) {
  float* out = c.data + row0 * c.row_stride + col0 * c.col_stride;
  if (c.col_stride == 1) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out + r * c.row_stride, buf + r * ld, std::size_t(nc) * sizeof(float));
    return;
  }
  if (c.row_stride == 1) return simd::transpose_floats(buf, ld, out, c.col_stride, rows, nc);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < nc; ++j) out[r * c.row_stride + j * c.col_stride] = buf[r * ld + j];
}

// Each kMc-row strip of C against one packed block of B (columns [n0, n0 + nc), all of K, at
// `bp`), summed over every K block while the strip stays in L2 (in the buffer above): C is written
// once per strip.
void sweep_block(int64_t m, int64_t k, const float* ap, const float* bp, int64_t n0, int64_t nc,
                 const StridedOut& c, const float* row_bias, const float* col_bias) {
  const int64_t nc_padded = (nc + kNr - 1) / kNr * kNr, ld = buffer_stride(nc);
  float* sums = grow(scratch(2), kMc * ld);
  for (int64_t m0 = 0; m0 < m; m0 += kMc) {
    const int64_t mc = std::min(kMc, m - m0);
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      const bool first = k0 == 0, last = k0 + kc == k;
      for (int64_t j = 0; j < nc; j += kNr) {
        const float* b_panel = bp + k0 * nc_padded + (j / kNr) * kc * kNr;
        for (int64_t i = 0; i < mc; i += kMr) {
          const int64_t row = m0 + i;
          micro_kernel(kc, ap + row * k + k0 * kMr, b_panel, sums + i * ld + j, ld, 1,
                       std::min(kMr, m - row), std::min(kNr, nc - j), !first,
                       last ? Bias{row_bias ? row_bias + row : nullptr,
                                   col_bias ? col_bias + n0 + j : nullptr}
                            : Bias{});
        }
      }
    }
    copy_out(sums, ld, mc, nc, c, m0, n0);
  }
}

// Columns [n0, n0 + nc) of B, all of K, packed K block by K block at `dst` (sweep_block's layout).
void pack_block(const PackB& pack_b, int64_t k, int64_t n0, int64_t nc, float* dst) {
  const int64_t nc_padded = (nc + kNr - 1) / kNr * kNr;
  for (int64_t k0 = 0; k0 < k; k0 += kKc)
    pack_b(k0, std::min(kKc, k - k0), n0, nc, dst + k0 * nc_padded);
}

// One thread's columns [n_begin, n_end) of C against the packed A, a block of columns at a time:
// the block's B is packed whole (all of K), then swept.
void run_columns(int64_t m, int64_t k, const float* ap, const PackB& pack_b, const StridedOut& c,
                 const float* row_bias, const float* col_bias, int64_t n_begin, int64_t n_end) {
  const int64_t ncb = column_block(k);
  const int64_t width = std::min(ncb, (n_end - n_begin + kNr - 1) / kNr * kNr);
  float* bp = grow(scratch(1), k * width);
  for (int64_t n0 = n_begin; n0 < n_end; n0 += ncb) {
    const int64_t nc = std::min(ncb, n_end - n0);
    pack_block(pack_b, k, n0, nc, bp);
    sweep_block(m, k, ap, bp, n0, nc, c, row_bias, col_bias);
  }
}

// The same product for a long K, where a B block of all K (run_columns) would be narrow and A,
// larger than the caches, would stream again for every one: Goto's order, a kKc x ncb block of B
// packed at a time and every strip of C summed over it. Each element gets its K blocks' sums in
// the same order as in run_columns, so the bits are the same; C is read once per K block.
void run_columns_long_k(int64_t m, int64_t k, const float* ap, const PackB& pack_b,
                        const StridedOut& c, const float* row_bias, const float* col_bias,
                        int64_t n_begin, int64_t n_end) {
  const int64_t ncb = std::min(kNc, (n_end - n_begin + kNr - 1) / kNr * kNr);
  float* bp = grow(scratch(1), kKc * ncb);
  // C's block summed in the buffer sweep_block uses where it is small enough to stay in L3.
  const int64_t ld = buffer_stride(ncb);
  const bool buffered = m * ld <= kCBudget;
  float* sums = buffered ? grow(scratch(2), m * ld) : nullptr;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += ncb) {
    const int64_t nc = std::min(ncb, n_end - n0);
    const StridedOut to = buffered
                              ? StridedOut{sums, ld, 1}
                              : StridedOut{c.data + n0 * c.col_stride, c.row_stride, c.col_stride};
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      const bool first = k0 == 0, last = k0 + kc == k;
      pack_b(k0, kc, n0, nc, bp);
      for (int64_t m0 = 0; m0 < m; m0 += kMc)
        for (int64_t j = 0; j < nc; j += kNr)
          for (int64_t row = m0; row < std::min(m, m0 + kMc); row += kMr)
            micro_kernel(kc, ap + row * k + k0 * kMr, bp + (j / kNr) * kc * kNr,
                         to.data + row * to.row_stride + j * to.col_stride, to.row_stride,
                         to.col_stride, std::min(kMr, m - row), std::min(kNr, nc - j), !first,
                         last ? Bias{row_bias ? row_bias + row : nullptr,
                                     col_bias ? col_bias + n0 + j : nullptr}
                              : Bias{});
    }
    if (buffered) copy_out(sums, ld, m, nc, c, 0, n0);
  }
}

// One panel of kNr columns of B (cols of them real) over kc rows, from `src` = B(k0, n0 + j0).
void pack_b_panel(const float* src, const Strided& b, int64_t kc, int64_t cols, float* panel) {
  if (b.col_stride == 1) {
    for (int64_t kk = 0; kk < kc; ++kk) {
      std::memcpy(panel + kk * kNr, src + kk * b.row_stride, std::size_t(cols) * sizeof(float));
      std::fill(panel + kk * kNr + cols, panel + (kk + 1) * kNr, 0.0f);
    }
    return;
  }
#if defined(__AVX512F__)
  if (cols == kNr && b.row_stride == 1) {  // B transposed (x W^T): columns are rows of W
    pack_a_panel_rows(src, b.col_stride, kc, panel);
    return;
  }
#endif
  if (cols < kNr) std::fill(panel, panel + kc * kNr, 0.0f);
  for (int64_t j = 0; j < cols; ++j)  // read each column of B in order
    for (int64_t kk = 0; kk < kc; ++kk)
      panel[kk * kNr + j] = src[j * b.col_stride + kk * b.row_stride];
}

// k == 0: C is its biases (or zeros).
void write_biases(int64_t m, int64_t n, const StridedOut& c, const float* row_bias,
                  const float* col_bias) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      c.data[i * c.row_stride + j * c.col_stride] =
          (row_bias ? row_bias[i] : 0.0f) + (col_bias ? col_bias[j] : 0.0f);
}

// A packed into this thread's scratch.
const float* packed_a(const Strided& a, int64_t m, int64_t k, int threads) {
  float* ap = grow(scratch(0), (m + kMr - 1) / kMr * kMr * k);
  pack_a(a, m, k, ap, threads);
  return ap;
}

}  // namespace

int threads_for(int64_t macs) {
  if (macs < kParallelMacs || omp_in_parallel()) return 1;
  return omp_get_max_threads();
}

PackB pack_strided(Strided b) {
  return [b](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
    for (int64_t j0 = 0; j0 < nc; j0 += kNr)
      pack_b_panel(b.data + k0 * b.row_stride + (n0 + j0) * b.col_stride, b, kc,
                   std::min(kNr, nc - j0), dst + (j0 / kNr) * kc * kNr);
  };
}

PackB pack_rows(ReadRow read) {
  return [read](int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst) {
    thread_local std::vector<float> rows;
    if (int64_t(rows.size()) < kNr * kc) rows.resize(std::size_t(kNr * kc));
    for (int64_t j0 = 0; j0 < nc; j0 += kNr) {
      const int64_t cols = std::min(kNr, nc - j0);
      for (int64_t j = 0; j < cols; ++j) read(n0 + j0 + j, k0, kc, rows.data() + j * kc);
      pack_b_panel(rows.data(), {rows.data(), 1, kc}, kc, cols, dst + (j0 / kNr) * kc * kNr);
    }
  };
}

void gemm(int64_t m, int64_t n, int64_t k, Strided a, const PackB& b, StridedOut c,
          const float* row_bias, const float* col_bias) {
  if (m <= 0 || n <= 0) return;
  if (k == 0) return write_biases(m, n, c, row_bias, col_bias);
  const int threads = threads_for(m * n * k);
  const float* ap = packed_a(a, m, k, threads);
  // Columns split evenly in whole panels; a thread with none skips.
  const int64_t per_thread = ((n + threads - 1) / threads + kNr - 1) / kNr * kNr;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int64_t begin = std::min(n, per_thread * omp_get_thread_num());
    const int64_t end = std::min(n, begin + per_thread);
    if (begin < end)
      (k > kLongK ? run_columns_long_k : run_columns)(m, k, ap, b, c, row_bias, col_bias, begin,
                                                      end);
  }
}

void PackedB::pack(int64_t k, int64_t n, const PackB& packer) {
  k_ = k;
  n_ = n;
  if (k <= 0 || n <= 0) return;
  const int64_t ncb = column_block(k), blocks = (n + ncb - 1) / ncb;
  data_.resize(std::size_t(k * ((n + kNr - 1) / kNr * kNr)));
#pragma omp parallel for schedule(static) num_threads(threads_for(k* n)) if (blocks > 1)
  for (int64_t i = 0; i < blocks; ++i)
    pack_block(packer, k, i * ncb, std::min(ncb, n - i * ncb), data_.data() + i * ncb * k);
}

void gemm(int64_t m, Strided a, const PackedB& b, StridedOut c, const float* row_bias,
          const float* col_bias) {
  const int64_t n = b.n_, k = b.k_;
  if (m <= 0 || n <= 0) return;
  if (k == 0) return write_biases(m, n, c, row_bias, col_bias);
  const int threads = threads_for(m * n * k);
  const float* ap = packed_a(a, m, k, threads);
  const int64_t ncb = column_block(k), blocks = (n + ncb - 1) / ncb;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && blocks > 1)
  for (int64_t i = 0; i < blocks; ++i)
    sweep_block(m, k, ap, b.data_.data() + i * ncb * k, i * ncb, std::min(ncb, n - i * ncb), c,
                row_bias, col_bias);
}

}  // namespace tp::sgemm
