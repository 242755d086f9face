// Ops on token tensors [..., D]: linear over the last dim, multi-head attention (self or cross,
// with an additive mask or causal per frame), LayerNorm over the last dims, RMSNorm. GEMMs
// accumulate in T (fp32: sgemm; fp64: Eigen); softmax and statistics in double, one rounding to
// T.
#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "reference/ops/ops.h"
#include "reference/ops/vector_exp.h"

namespace tp::ref {
namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMatrix<T>>;

}  // namespace

template <class T>
Tensor linear_last(const Tensor& x, const Tensor& weight, const Tensor* bias) {
  const int64_t din = weight.dim(1), dout = weight.dim(0);
  TP_CHECK(x.rank() >= 1 && x.shape().back() == din,
           "linear: input " + shape_string(x.shape()) + ", weight " + shape_string(weight.shape()));
  Shape shape = x.shape();
  shape.back() = dout;
  Tensor out = Tensor::uninitialized(dtype_of<T>(), shape);
  const int64_t rows = x.numel() / din;
  if constexpr (std::is_same_v<T, float>) {
    // [rows, din] x W^T: W's rows are B's columns, read in order as they are packed.
    sgemm::gemm(rows, dout, din, {x.data<float>(), din, 1},
                sgemm::pack_strided({weight.data<float>(), 1, din}), {out.data<float>(), dout, 1},
                nullptr, bias ? bias->data<float>() : nullptr);
    return out;
  }
  Eigen::Map<RowMatrix<T>> o(out.data<T>(), rows, dout);
  o.noalias() =
      ConstMap<T>(x.data<T>(), rows, din) * ConstMap<T>(weight.data<T>(), dout, din).transpose();
  if (bias)
    o.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(bias->data<T>(), dout);
  return out;
}

template <class T>
Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                            const OpAttrs& a) {
  TP_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3 && q.dim(0) == k.dim(0) &&
               k.dim(0) == v.dim(0) && k.dim(1) == v.dim(1) && q.dim(2) == k.dim(2) &&
               q.dim(2) % a.heads == 0 && v.dim(2) % a.heads == 0,
           "attention: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) + ", v " +
               shape_string(v.shape()) + ", " + std::to_string(a.heads) + " heads");
  const int64_t batch = q.dim(0), lq = q.dim(1), lk = k.dim(1), heads = a.heads;
  const int64_t dh = q.dim(2) / heads, dv = v.dim(2) / heads;
  if (mask)
    TP_CHECK((mask->rank() == 2 || (mask->rank() == 3 && mask->dim(0) == batch)) &&
                 mask->dim(mask->rank() - 2) == lq && mask->dim(mask->rank() - 1) == lk,
             "attention mask " + shape_string(mask->shape()) + " for " + std::to_string(lq) +
                 " queries and " + std::to_string(lk) + " keys");
  Tensor out(dtype_of<T>(), {batch, lq, heads * dv});
  const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
  const T* pm = mask ? mask->data<T>() : nullptr;
  T* po = out.data<T>();
  // Each thread's scores, then its probabilities in place, reused for every head it takes:
  // an [lq, lk] matrix per head would be a fresh 64 MiB (page faults and zeroing) at 4096 tokens.
#pragma omp parallel if (batch * lq * lk * q.dim(2) >= kParallelMacs)
  {
    std::vector<T> buffer(static_cast<std::size_t>(lq * lk));
    std::vector<double> row(static_cast<std::size_t>(lk));
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h) {
        // Head h's columns of q, k and v (strided views of the token rows).
        Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>> qh(
            pq + b * lq * q.dim(2) + h * dh, lq, dh, Eigen::OuterStride<>(q.dim(2)));
        Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>> kh(
            pk + b * lk * k.dim(2) + h * dh, lk, dh, Eigen::OuterStride<>(k.dim(2)));
        Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>> vh(
            pv + b * lk * v.dim(2) + h * dv, lk, dv, Eigen::OuterStride<>(v.dim(2)));
        Eigen::Map<RowMatrix<T>> scores(buffer.data(), lq, lk);
        if constexpr (std::is_same_v<T, float>) {
          sgemm::gemm(lq, lk, dh, {qh.data(), q.dim(2), 1},
                      sgemm::pack_strided({kh.data(), 1, k.dim(2)}), {scores.data(), lk, 1});
        } else {
          scores.noalias() = qh * kh.transpose();
        }
        for (int64_t i = 0; i < lq; ++i) {
          double max = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < lk; ++j) {
            double s = double(scores(i, j)) * a.scale;
            if (pm) s += double(pm[(mask->rank() == 3 ? b * lq * lk : 0) + i * lk + j]);
            if (a.frame_tokens > 0 && j / a.frame_tokens > i / a.frame_tokens)
              s = -std::numeric_limits<double>::infinity();
            row[std::size_t(j)] = s;
            max = std::max(max, s);
          }
          for (double& s : row) s -= max;
          exp_in_place(row.data(), lk);
          double sum = 0;
          for (double s : row) sum += s;
          for (int64_t j = 0; j < lk; ++j) scores(i, j) = T(row[std::size_t(j)] / sum);
        }
        Eigen::Map<RowMatrix<T>, 0, Eigen::OuterStride<>> oh(po + b * lq * heads * dv + h * dv, lq,
                                                             dv, Eigen::OuterStride<>(heads * dv));
        if constexpr (std::is_same_v<T, float>) {
          sgemm::gemm(lq, dv, lk, {scores.data(), lk, 1},
                      sgemm::pack_strided({vh.data(), v.dim(2), 1}), {oh.data(), heads * dv, 1});
        } else {
          oh.noalias() = scores * vh;
        }
      }
  }
  return out;
}

namespace {

// y = (x - center) * inv * gamma + beta over rows of the last n elements, with (center, inv)
// from `stats` on each row (in double); gamma and beta optional.
template <class T, class Stats>
Tensor normalize_rows(const Tensor& x, int64_t n, const Tensor* gamma, const Tensor* beta,
                      Stats stats) {
  Tensor out = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const int64_t rows = x.numel() / n;
  const T* px = x.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = px + r * n;
    const auto [center, inv] = stats(xr);
    for (int64_t i = 0; i < n; ++i) {
      double y = (double(xr[i]) - center) * inv;
      if (gamma) y = y * double(gamma->data<T>()[i]);
      if (beta) y = y + double(beta->data<T>()[i]);
      po[r * n + i] = T(y);
    }
  }
  return out;
}

}  // namespace

template <class T>
Tensor layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, int norm_dims,
                  double eps) {
  TP_CHECK(norm_dims >= 1 && norm_dims <= x.rank(),
           "layer_norm over " + std::to_string(norm_dims) + " dims of " + shape_string(x.shape()));
  int64_t n = 1;
  for (int i = x.rank() - norm_dims; i < x.rank(); ++i) n *= x.dim(i);
  if (gamma) TP_CHECK(gamma->numel() == n, "layer_norm weight " + shape_string(gamma->shape()));
  return normalize_rows<T>(x, n, gamma, beta, [n, eps](const T* xr) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += double(xr[i]);
    mean /= double(n);
    for (int64_t i = 0; i < n; ++i) var += (double(xr[i]) - mean) * (double(xr[i]) - mean);
    return std::pair<double, double>{mean, 1.0 / std::sqrt(var / double(n) + eps)};
  });
}

template <class T>
Tensor rms_norm(const Tensor& x, const Tensor* gamma, double eps) {
  const int64_t n = x.shape().back();
  if (gamma) TP_CHECK(gamma->numel() == n, "rms_norm weight " + shape_string(gamma->shape()));
  return normalize_rows<T>(x, n, gamma, nullptr, [n, eps](const T* xr) {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += double(xr[i]) * double(xr[i]);
    return std::pair<double, double>{0.0, 1.0 / std::sqrt(ms / double(n) + eps)};
  });
}

#define TP_INSTANTIATE(T)                                                                  \
  template Tensor linear_last<T>(const Tensor&, const Tensor&, const Tensor*);             \
  template Tensor multi_head_attention<T>(const Tensor&, const Tensor&, const Tensor&,     \
                                          const Tensor*, const OpAttrs&);                  \
  template Tensor layer_norm<T>(const Tensor&, const Tensor*, const Tensor*, int, double); \
  template Tensor rms_norm<T>(const Tensor&, const Tensor*, double);
TP_INSTANTIATE(float)
TP_INSTANTIATE(double)
#undef TP_INSTANTIATE

}  // namespace tp::ref
