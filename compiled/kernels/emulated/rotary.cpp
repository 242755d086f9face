// The emulation's RoPE (OpKind::kRotaryEmbedding): adjacent pairs of each head rotated in T by
// the float32 tables every path shares (harness/core/rotary.h).
#include "harness/core/rotary.h"

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

namespace tp::compiled::emulated {

// RoPE on x [B,S,heads*Dh]: per token, per pair, in T with the shared float32 tables.
template <class T>
Tensor rotary_embedding(const Tensor& x, const Shape& grid, const OpAttrs& a) {
  const std::size_t g = grid.size() - 3;
  const RotaryTables t = rotary_tables(a.dims, a.scale, grid[g], grid[g + 1], grid[g + 2]);
  Tensor result = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const int64_t rows = x.dim(0) * x.dim(1), heads = a.heads;
  const T* px = x.data<T>();
  T* po = result.data<T>();
#pragma omp parallel for if (x.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const std::size_t row = std::size_t((r % t.tokens) * t.pairs);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t.pairs; ++i) {
        const int64_t at = (r * heads + h) * t.pairs * 2 + 2 * i;
        const T c = T(t.cos[row + std::size_t(i)]), s = T(t.sin[row + std::size_t(i)]);
        po[at] = px[at] * c - px[at + 1] * s;
        po[at + 1] = px[at] * s + px[at + 1] * c;
      }
  }
  return result;
}

template Tensor rotary_embedding<float>(const Tensor&, const Shape&, const OpAttrs&);
template Tensor rotary_embedding<double>(const Tensor&, const Shape&, const OpAttrs&);

}  // namespace tp::compiled::emulated
