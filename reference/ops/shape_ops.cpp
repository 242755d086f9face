// Concat, slice, reshape and permute over any axis, and elementwise binary ops with numpy
// broadcasting (the modulation x * (1 + scale) + shift of DiT blocks). Values are copied, or
// combined in double and rounded once to T.
#include <cstring>

#include "harness/core/parallel.h"
#include "harness/core/shapes.h"
#include "reference/ops/ops.h"

namespace tp::ref {
namespace {

int normalized_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// Elements before, along and after `axis`.
struct AxisSplit {
  int64_t outer = 1, along = 1, inner = 1;
};
AxisSplit split_at(const Shape& s, int axis) {
  AxisSplit a;
  for (int i = 0; i < int(s.size()); ++i)
    (i < axis ? a.outer : i == axis ? a.along : a.inner) *= s[std::size_t(i)];
  return a;
}

}  // namespace

template <class T>
Tensor concat(const std::vector<const Tensor*>& xs, int axis) {
  const int rank = xs[0]->rank();
  axis = normalized_axis(axis, rank);
  Shape shape = xs[0]->shape();
  shape[std::size_t(axis)] = 0;
  for (const Tensor* x : xs) {
    Shape other = x->shape();
    TP_CHECK(x->rank() == rank, "concat of " + shape_string(x->shape()));
    shape[std::size_t(axis)] += other[std::size_t(axis)];
    other[std::size_t(axis)] = 0;
    Shape want = shape;
    want[std::size_t(axis)] = 0;
    TP_CHECK(other == want, "concat: " + shape_string(x->shape()) + " does not fit " +
                                shape_string(xs[0]->shape()) + " along axis " +
                                std::to_string(axis));
  }
  Tensor out = Tensor::uninitialized(dtype_of<T>(), shape);
  const AxisSplit o = split_at(shape, axis);
  int64_t offset = 0;
  for (const Tensor* x : xs) {
    const AxisSplit s = split_at(x->shape(), axis);
    for (int64_t i = 0; i < s.outer; ++i)
      std::memcpy(out.data<T>() + (i * o.along + offset) * o.inner,
                  x->data<T>() + i * s.along * s.inner, std::size_t(s.along * s.inner) * sizeof(T));
    offset += s.along;
  }
  return out;
}

template <class T>
Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end) {
  axis = normalized_axis(axis, x.rank());
  TP_CHECK(axis >= 0 && axis < x.rank() && 0 <= begin && begin < end && end <= x.dim(axis),
           "slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") of axis " +
               std::to_string(axis) + " of " + shape_string(x.shape()));
  Shape shape = x.shape();
  shape[std::size_t(axis)] = end - begin;
  Tensor out = Tensor::uninitialized(dtype_of<T>(), shape);
  const AxisSplit s = split_at(x.shape(), axis);
  for (int64_t i = 0; i < s.outer; ++i)
    std::memcpy(out.data<T>() + i * (end - begin) * s.inner,
                x.data<T>() + (i * s.along + begin) * s.inner,
                std::size_t((end - begin) * s.inner) * sizeof(T));
  return out;
}

template <class T>
Tensor permute(const Tensor& x, const std::vector<int64_t>& order) {
  const int rank = x.rank();
  TP_CHECK(int(order.size()) == rank, "permute " + shape_string(x.shape()));
  Shape shape(static_cast<std::size_t>(rank)), in_strides(static_cast<std::size_t>(rank), 1);
  for (int i = rank - 2; i >= 0; --i)
    in_strides[std::size_t(i)] = in_strides[std::size_t(i) + 1] * x.dim(i + 1);
  for (int i = 0; i < rank; ++i) shape[std::size_t(i)] = x.dim(int(order[std::size_t(i)]));
  Tensor out = Tensor::uninitialized(dtype_of<T>(), shape);
  if (out.numel() == 0) return out;
  std::vector<int64_t> source(static_cast<std::size_t>(rank));  // by output axis
  for (int i = 0; i < rank; ++i)
    source[std::size_t(i)] = in_strides[std::size_t(order[std::size_t(i)])];
  const T* px = x.data<T>();
  T* po = out.data<T>();
  // A row of the output's last axis at a time, its source offset from the row's index.
  const int64_t inner = shape.back(), rows = out.numel() / inner, step = source.back();
#pragma omp parallel for schedule(static) if (out.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t src = 0;
    for (int64_t i = rank - 2, rest = r; i >= 0; --i) {
      src += rest % shape[std::size_t(i)] * source[std::size_t(i)];
      rest /= shape[std::size_t(i)];
    }
    for (int64_t j = 0; j < inner; ++j) po[r * inner + j] = px[src + j * step];
  }
  return out;
}

namespace {

// Strides of a tensor of shape `s` over the axes of a broadcast shape of `rank` axes (0 where
// broadcast), numpy's alignment from the last axis.
std::vector<int64_t> broadcast_strides(const Shape& s, std::size_t rank) {
  std::vector<int64_t> st(rank, 0);
  int64_t step = 1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::size_t axis = s.size() - 1 - i, out_axis = rank - 1 - i;
    st[out_axis] = s[axis] == 1 ? 0 : step;
    step *= s[axis];
  }
  return st;
}

// out = f(a, b) with broadcasting, in double, one rounding to T: a row of the output's last axis
// at a time, its offsets in a and b found from the row's index.
template <class T, class F>
void broadcast_rows(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const Shape& shape = out.shape();
  const std::size_t rank = shape.size();
  const std::vector<int64_t> sa = broadcast_strides(a.shape(), rank),
                             sb = broadcast_strides(b.shape(), rank);
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T* po = out.data<T>();
  const int64_t inner = rank ? shape.back() : 1, rows = inner ? out.numel() / inner : 0;
  const int64_t step_a = rank ? sa.back() : 0, step_b = rank ? sb.back() : 0;
#pragma omp parallel for schedule(static) if (out.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t ia = 0, ib = 0;
    for (int64_t i = int64_t(rank) - 2, rest = r; i >= 0; --i) {
      const int64_t at = rest % shape[std::size_t(i)];
      rest /= shape[std::size_t(i)];
      ia += at * sa[std::size_t(i)];
      ib += at * sb[std::size_t(i)];
    }
    for (int64_t j = 0; j < inner; ++j)
      po[r * inner + j] = T(f(double(pa[ia + j * step_a]), double(pb[ib + j * step_b])));
  }
}

}  // namespace

template <class T>
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  auto shape = broadcast_shape(a.shape(), b.shape());
  TP_CHECK(shape.ok(), shape.ok() ? "" : shape.error().message());
  Tensor out = Tensor::uninitialized(dtype_of<T>(), *shape);
  switch (op) {
    case BinaryOp::kAdd:
      broadcast_rows<T>(a, b, out, [](double x, double y) { return x + y; });
      break;
    case BinaryOp::kSub:
      broadcast_rows<T>(a, b, out, [](double x, double y) { return x - y; });
      break;
    case BinaryOp::kMul:
      broadcast_rows<T>(a, b, out, [](double x, double y) { return x * y; });
      break;
    case BinaryOp::kDiv:
      broadcast_rows<T>(a, b, out, [](double x, double y) { return x / y; });
      break;
  }
  return out;
}

#define TP_INSTANTIATE(T)                                                 \
  template Tensor concat<T>(const std::vector<const Tensor*>&, int);      \
  template Tensor slice<T>(const Tensor&, int, int64_t, int64_t);         \
  template Tensor permute<T>(const Tensor&, const std::vector<int64_t>&); \
  template Tensor binary<T>(BinaryOp, const Tensor&, const Tensor&);
TP_INSTANTIATE(float)
TP_INSTANTIATE(double)
#undef TP_INSTANTIATE

}  // namespace tp::ref
