// A DiT's token ops: rotary position embedding over a frame x height x width token grid, and
// unpatchify from tokens back to a [B,C,F,H,W] video. RoPE rotates in T with the float32 tables
// every path shares; unpatchify only moves values.
#include "harness/core/parallel.h"
#include "harness/core/rotary.h"
#include "reference/ops/ops.h"

namespace tp::ref {

template <class T>
Tensor rotary_embedding(const Tensor& x, const Shape& grid, const OpAttrs& a) {
  const std::size_t g = grid.size() - 3;
  const RotaryTables t = rotary_tables(a.dims, a.scale, grid[g], grid[g + 1], grid[g + 2]);
  const int64_t batch = x.dim(0), tokens = x.dim(1), width = x.dim(2);
  const int64_t head_dim = width / a.heads;
  Tensor out = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const T* px = x.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for if (x.numel() >= kParallelElements)
  for (int64_t row = 0; row < batch * tokens; ++row) {
    const int64_t token = row % tokens;
    const float* c = &t.cos[std::size_t(token * t.pairs)];
    const float* s = &t.sin[std::size_t(token * t.pairs)];
    for (int64_t h = 0; h < a.heads; ++h) {
      const T* xi = px + row * width + h * head_dim;
      T* oi = po + row * width + h * head_dim;
      for (int64_t i = 0; i < t.pairs; ++i) {
        const T x1 = xi[2 * i], x2 = xi[2 * i + 1], ci = T(c[i]), si = T(s[i]);
        oi[2 * i] = x1 * ci - x2 * si;
        oi[2 * i + 1] = x1 * si + x2 * ci;
      }
    }
  }
  return out;
}

template <class T>
Tensor unpatchify(const Tensor& x, const Shape& grid, const OpAttrs& a) {
  const std::size_t g = grid.size() - 3;
  const int64_t f = grid[g], h = grid[g + 1], w = grid[g + 2];
  const int64_t pt = a.dims[0], ph = a.dims[1], pw = a.dims[2];
  const int64_t batch = x.dim(0), channels = x.dim(2) / (pt * ph * pw);
  const Shape shape{batch, channels, f * pt, h * ph, w * pw};
  Tensor out = Tensor::uninitialized(dtype_of<T>(), shape);
  const T* px = x.data<T>();
  T* po = out.data<T>();
  // Each output row (b, c, frame, y) reads one token row per patch column.
#pragma omp parallel for if (out.numel() >= kParallelElements)
  for (int64_t row = 0; row < batch * channels * f * pt * h * ph; ++row) {
    const int64_t y = row % (h * ph), frame = row / (h * ph) % (f * pt);
    const int64_t c = row / (h * ph * f * pt) % channels, b = row / (h * ph * f * pt * channels);
    const int64_t fi = frame / pt, i = frame % pt, hi = y / ph, j = y % ph;
    for (int64_t xo = 0; xo < w * pw; ++xo) {
      const int64_t wi = xo / pw, k = xo % pw;
      const int64_t token = (fi * h + hi) * w + wi;
      po[row * w * pw + xo] =
          px[(b * f * h * w + token) * x.dim(2) + ((i * ph + j) * pw + k) * channels + c];
    }
  }
  return out;
}

template Tensor rotary_embedding<float>(const Tensor&, const Shape&, const OpAttrs&);
template Tensor rotary_embedding<double>(const Tensor&, const Shape&, const OpAttrs&);
template Tensor unpatchify<float>(const Tensor&, const Shape&, const OpAttrs&);
template Tensor unpatchify<double>(const Tensor&, const Shape&, const OpAttrs&);

}  // namespace tp::ref
