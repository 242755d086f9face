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
  const T* px = x.data<T>();
  T* po = out.data<T>();
  std::vector<int64_t> idx(std::size_t(rank), 0);
  for (int64_t n = 0; n < out.numel(); ++n) {
    int64_t src = 0;
    for (int i = 0; i < rank; ++i)
      src += idx[std::size_t(i)] * in_strides[std::size_t(order[std::size_t(i)])];
    po[n] = px[src];
    for (int i = rank - 1; i >= 0 && ++idx[std::size_t(i)] == shape[std::size_t(i)]; --i)
      idx[std::size_t(i)] = 0;
  }
  return out;
}

namespace {
double apply(BinaryOp op, double x, double y) {
  return op == BinaryOp::kAdd   ? x + y
         : op == BinaryOp::kSub ? x - y
         : op == BinaryOp::kMul ? x * y
                                : x / y;
}
}  // namespace

template <class T>
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) {  // element by element (a residual add)
    Tensor out = Tensor::uninitialized(dtype_of<T>(), a.shape());
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    const int64_t n = a.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i) po[i] = T(apply(op, double(pa[i]), double(pb[i])));
    return out;
  }
  auto shape = broadcast_shape(a.shape(), b.shape());
  TP_CHECK(shape.ok(), shape.ok() ? "" : shape.error().message());
  const std::size_t rank = shape->size();
  // Strides of a and b over the output's axes (0 where broadcast).
  auto strides_of = [&](const Shape& s) {
    std::vector<int64_t> st(rank, 0);
    int64_t step = 1;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::size_t axis = s.size() - 1 - i, out_axis = rank - 1 - i;
      st[out_axis] = s[axis] == 1 ? 0 : step;
      step *= s[axis];
    }
    return st;
  };
  const std::vector<int64_t> sa = strides_of(a.shape()), sb = strides_of(b.shape());
  Tensor out = Tensor::uninitialized(dtype_of<T>(), *shape);
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T* po = out.data<T>();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t n = 0; n < out.numel(); ++n) {
    int64_t ia = 0, ib = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      ia += idx[i] * sa[i];
      ib += idx[i] * sb[i];
    }
    po[n] = T(apply(op, double(pa[ia]), double(pb[ib])));
    for (int i = int(rank) - 1; i >= 0 && ++idx[std::size_t(i)] == (*shape)[std::size_t(i)]; --i)
      idx[std::size_t(i)] = 0;
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
