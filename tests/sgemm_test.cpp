// The fp32 matrix product under every layout its callers use (row- and column-major A and B,
// C stored transposed, row and column biases), at sizes that leave partial tiles and K blocks,
// on one thread and on all: each element within the fp32 summation bound of the exact product,
// |c - exact| <= (k + 2) * u * (sum |a*b| + |bias|), u = 2^-24 (the bound of any summation order).
#include "harness/core/sgemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/core/parallel.h"
#include "harness/core/rng.h"

namespace tp {
namespace {

struct Layout {
  bool a_column_major, b_column_major, c_transposed, row_bias, col_bias;
};

std::vector<float> seeded(int64_t n, const std::string& stream) {
  Rng rng(7, stream);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = float(rng.uniform(-1, 1));
  return v;
}

void check_product(int64_t m, int64_t n, int64_t k, const Layout& l) {
  const std::string id = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  const std::vector<float> a = seeded(m * k, "a" + id), b = seeded(k * n, "b" + id);
  const std::vector<float> rb = seeded(m, "r" + id), cb = seeded(n, "c" + id);
  const sgemm::Strided av =
      l.a_column_major ? sgemm::Strided{a.data(), 1, m} : sgemm::Strided{a.data(), k, 1};
  const sgemm::Strided bv =
      l.b_column_major ? sgemm::Strided{b.data(), 1, k} : sgemm::Strided{b.data(), n, 1};
  std::vector<float> c(std::size_t(m * n), NAN);
  const sgemm::StridedOut cv =
      l.c_transposed ? sgemm::StridedOut{c.data(), 1, m} : sgemm::StridedOut{c.data(), n, 1};
  sgemm::gemm(m, n, k, av, sgemm::pack_strided(bv), cv, l.row_bias ? rb.data() : nullptr,
              l.col_bias ? cb.data() : nullptr);
  const double u = std::ldexp(1.0, -24);
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t t = 0; t < k; ++t) {
        const double p = double(av.data[i * av.row_stride + t * av.col_stride]) *
                         double(bv.data[t * bv.row_stride + j * bv.col_stride]);
        exact += p;
        magnitude += std::fabs(p);
      }
      if (l.row_bias) exact += rb[std::size_t(i)], magnitude += std::fabs(rb[std::size_t(i)]);
      if (l.col_bias) exact += cb[std::size_t(j)], magnitude += std::fabs(cb[std::size_t(j)]);
      const double got = cv.data[i * cv.row_stride + j * cv.col_stride];
      if (!(std::fabs(got - exact) <= double(k + 2) * u * magnitude) && bad++ < 3)
        ADD_FAILURE() << id << " element (" << i << ", " << j << "): " << got << " vs exact "
                      << exact;
    }
  EXPECT_EQ(bad, 0) << id;
}

TEST(Sgemm, MatchesTheExactProductInEveryLayout) {
  const int64_t sizes[][3] = {{1, 1, 1},   {5, 7, 3},    {6, 16, 256},  {7, 17, 257},
                              {13, 33, 0}, {145, 40, 9}, {31, 300, 600}};
  for (const auto& s : sizes)
    for (int mask = 0; mask < 32; ++mask)
      check_product(
          s[0], s[1], s[2],
          {bool(mask & 1), bool(mask & 2), bool(mask & 4), bool(mask & 8), bool(mask & 16)});
}

TEST(Sgemm, SplitsLargeProductsAcrossThreadsWithTheSameBound) {
  // Above kParallelMacs, with a column count that leaves one thread a partial panel.
  ASSERT_GT(int64_t(96) * 1000 * 1200, kParallelMacs);
  check_product(96, 1000, 300 * 4, {false, false, false, true, false});
  check_product(96, 1000, 300 * 4, {true, true, true, false, true});
}

// A K past the long-K threshold (a feed-forward's 8960 is one) takes Goto's order, a K block of B
// at a time over every strip of C: the same bound, and the same bits as the K blocks summed one
// call at a time (each block's sum added to C in K order, the bias last), whether C's block is
// summed in a buffer (13 rows) or, too large for one (2100 rows of 1024 columns on one thread),
// in C itself (the driver is the same for every ISA: the large product runs where the kernel is
// vectorized, 10 s in the portable build).
TEST(Sgemm, LongKSumsItsBlocksInOrder) {
  check_product(13, 40, 9 * 512 + 7, {false, true, false, false, true});
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);  // all of C's 1024 columns in one thread's block
#if defined(__AVX2__)
  const std::vector<int64_t> rows{13, 2100};
#else
  const std::vector<int64_t> rows{13};
#endif
  for (const int64_t m : rows) {
    const int64_t n = m == 13 ? 40 : 1024, k = m == 13 ? 9 * 512 + 7 : 8 * 512 + 7;
    const std::vector<float> a = seeded(m * k, "long a"), b = seeded(k * n, "long b"),
                             bias = seeded(n, "long bias");
    std::vector<float> c(std::size_t(m * n)), want(std::size_t(m * n), 0.0f),
        block(std::size_t(m * n));
    sgemm::gemm(m, n, k, {a.data(), k, 1}, sgemm::pack_strided({b.data(), n, 1}), {c.data(), n, 1},
                nullptr, bias.data());
    for (int64_t k0 = 0; k0 < k; k0 += 512) {
      const int64_t kc = std::min<int64_t>(512, k - k0);
      sgemm::gemm(m, n, kc, {a.data() + k0, k, 1}, sgemm::pack_strided({b.data() + k0 * n, n, 1}),
                  {block.data(), n, 1});
      for (std::size_t i = 0; i < want.size(); ++i)
        want[i] = k0 == 0 ? block[i] : want[i] + block[i];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) want[std::size_t(i * n + j)] += bias[std::size_t(j)];
    EXPECT_EQ(c, want) << m << " rows";
  }
  omp_set_num_threads(threads);
}

// A B given by its rows (pack_rows: W's rows read a block at a time) packs as the same W read
// through a transposed view: the same bits, partial panels and K blocks included.
TEST(Sgemm, RowsReadByTheCallerPackAsTheTransposedView) {
  for (const int64_t n : {int64_t(16), int64_t(37)}) {
    const int64_t m = 21, k = 600;
    const std::vector<float> a = seeded(m * k, "rows a"), w = seeded(n * k, "rows w");
    std::vector<float> strided(std::size_t(m * n)), rows(std::size_t(m * n));
    sgemm::gemm(m, n, k, {a.data(), k, 1}, sgemm::pack_strided({w.data(), 1, k}),
                {strided.data(), n, 1});
    int64_t reads = 0;
    sgemm::gemm(m, n, k, {a.data(), k, 1},
                sgemm::pack_rows([&](int64_t row, int64_t k0, int64_t kc, float* out) {
                  ++reads;
                  std::copy_n(w.data() + row * k + k0, kc, out);
                }),
                {rows.data(), n, 1});
    EXPECT_EQ(rows, strided) << n << " columns";
    EXPECT_GE(reads, n) << "every row read";
  }
}

// A B packed once (attention's K^T and V, reused by every block of queries) gives the bits the
// packer gives call by call: several column blocks, a long K, partial panels, biases, one thread
// and all, and a second packing into the same memory.
TEST(Sgemm, PackedOnceGivesTheBitsOfPackingPerCall) {
  const int64_t shapes[][3] = {{37, 2100, 64}, {96, 70, 5000}, {5, 16, 1}, {200, 1000, 1200}};
  sgemm::PackedB packed;
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const std::string id = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    const std::vector<float> a = seeded(m * k, "pa" + id), b = seeded(k * n, "pb" + id),
                             bias = seeded(n, "pc" + id);
    const sgemm::Strided bv{b.data(), 1, k};  // x W^T, as attention's scores read K
    std::vector<float> per_call(std::size_t(m * n)), once(std::size_t(m * n), NAN);
    sgemm::gemm(m, n, k, {a.data(), k, 1}, sgemm::pack_strided(bv), {per_call.data(), n, 1},
                nullptr, bias.data());
    packed.pack(k, n, sgemm::pack_strided(bv));
    ASSERT_EQ(packed.k(), k);
    ASSERT_EQ(packed.n(), n);
    sgemm::gemm(m, {a.data(), k, 1}, packed, {once.data(), n, 1}, nullptr, bias.data());
    EXPECT_EQ(once, per_call) << id;
  }
}

}  // namespace
}  // namespace tp
