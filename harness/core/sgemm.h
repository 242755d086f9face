// The fp32 matrix product both CPU executors run their convs, linears and attention products on:
// C = A·B with A packed once per call into panels of kMr rows, B packed block by block into
// panels of kNr columns by a packer the caller chooses (a strided matrix, or a conv's patches
// gathered straight from its input: implicit GEMM, no im2col buffer), and a register-blocked
// micro-kernel (AVX-512 or AVX2+FMA where the build targets it, portable C++ otherwise)
// accumulating each element over a block of K in fp32 before adding it to C. Threads split N above
// a work threshold; below it, and inside another parallel region, the product runs on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tp::sgemm {

#if defined(__AVX512F__)
constexpr int64_t kMr = 16;  // rows of a micro-tile (A broadcasts): 16 accumulators of 32
#else
constexpr int64_t kMr = 6;  // rows of a micro-tile (A broadcasts): 12 accumulators of 16
#endif
constexpr int64_t kNr = 16;  // columns of a micro-tile (one 16-float or two 8-float vectors)

// Element (r, c) of a matrix at data[r * row_stride + c * col_stride]: row-major, column-major
// and transposed views alike.
struct Strided {
  const float* data;
  int64_t row_stride;
  int64_t col_stride;
};
struct StridedOut {
  float* data;
  int64_t row_stride;
  int64_t col_stride;
};

// Writes rows [k0, k0 + kc) and columns [n0, n0 + nc) of B as panels of kNr columns:
// dst[(j / kNr) * kc * kNr + kk * kNr + j % kNr] = B(k0 + kk, n0 + j); columns of the last
// panel past nc are zero. Called from several threads at once on disjoint blocks.
using PackB = std::function<void(int64_t k0, int64_t kc, int64_t n0, int64_t nc, float* dst)>;

// The packer of a strided B.
PackB pack_strided(Strided b);

// Writes elements [k0, k0 + kc) of row `row` of a matrix to `out`.
using ReadRow = std::function<void(int64_t row, int64_t k0, int64_t kc, float* out)>;
// The packer of a B whose columns are the rows `read` gives (x W^T for a W held in another form,
// such as narrow codes decoded as they are packed): each panel's rows are read into a buffer of
// this thread's, then packed as pack_strided packs a transposed B.
PackB pack_rows(ReadRow read);

// C = A·B for A [m, k], B [k, n] (given by its packer), C [m, n]; row_bias (m values) and
// col_bias (n values), where given, are added to each element after the sum. k == 0 writes the
// biases (or zeros).
void gemm(int64_t m, int64_t n, int64_t k, Strided a, const PackB& b, StridedOut c,
          const float* row_bias = nullptr, const float* col_bias = nullptr);

// B [k, n] packed whole, once, for several products against it (an attention head's K^T and V,
// reused by each block of its queries), in the layout gemm packs it in block by block; `pack`
// reuses the memory of an earlier packing.
class PackedB {
 public:
  void pack(int64_t k, int64_t n, const PackB& packer);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }

 private:
  friend void gemm(int64_t m, Strided a, const PackedB& b, StridedOut c, const float* row_bias,
                   const float* col_bias);
  std::vector<float> data_;
  int64_t k_ = 0, n_ = 0;
};

// C = A·B as above for a B packed beforehand: the same sums, so the same bits, as gemm with the
// packer B was packed by.
void gemm(int64_t m, Strided a, const PackedB& b, StridedOut c, const float* row_bias = nullptr,
          const float* col_bias = nullptr);

// Threads a piece of work of `macs` multiply-adds should use: 1 below kParallelMacs
// (harness/core/parallel.h) or inside a parallel region, else the OpenMP team size.
int threads_for(int64_t macs);

}  // namespace tp::sgemm
