// Ops on token tensors [..., D]: linear over the last dim, multi-head attention (self or cross,
// with an additive mask or causal per frame), LayerNorm over the last dims, RMSNorm. GEMMs
// accumulate in T (fp32: sgemm; fp64: Eigen); softmax and statistics in double, one rounding to
// T.
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/core/attention_head.h"
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

namespace {

constexpr int64_t kScoreBudget = int64_t(1) << 22;  // fp64: elements of one block of scores

// The largest of v[0, n) and their sum, over four interleaved lanes combined in a fixed order
// (vectorizable, and the same bits on any thread).
inline double lanes_max(const double* v, int64_t n) {
  double m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; ++l) m[l] = v[j + l] > m[l] ? v[j + l] : m[l];
  for (; j < n; ++j) m[0] = v[j] > m[0] ? v[j] : m[0];
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}
inline double lanes_sum(const double* v, int64_t n) {
  double t[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; ++l) t[l] += v[j + l];
  for (; j < n; ++j) t[0] += v[j];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

// One head's strided operands and output (see multi_head_attention).
template <class T>
struct Heads {
  const T *q, *k, *v, *mask;
  T* out;
  int64_t lq, lk, dh, dv, q_row, k_row, v_row, out_row, mask_batch;
  const OpAttrs* a;
};

// The softmax of score rows [q0, q0 + rows) of head h's block, in place, on the calling thread
// (a head or a block per thread): each row scaled and masked in double, its max subtracted, exp,
// one reciprocal of the sum, one rounding to T.
template <class T>
void softmax_rows(const Heads<T>& x, int64_t b, int64_t q0, int64_t rows, T* scores) {
  const OpAttrs& a = *x.a;
  thread_local std::vector<double> row;
  if (int64_t(row.size()) < x.lk) row.resize(static_cast<std::size_t>(x.lk));
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t qi = q0 + i;
    // The keys this query sees: all, or under the frame-causal mask those of frames up to its
    // own (the others weigh exactly 0).
    const int64_t seen =
        a.frame_tokens > 0 ? std::min(x.lk, (qi / a.frame_tokens + 1) * a.frame_tokens) : x.lk;
    T* si = scores + i * x.lk;
    const T* mi = x.mask ? x.mask + b * x.mask_batch + qi * x.lk : nullptr;
    double* e = row.data();
    for (int64_t j = 0; j < seen; ++j) e[j] = double(si[j]) * a.scale + (mi ? double(mi[j]) : 0.0);
    const double max = lanes_max(e, seen);
    for (int64_t j = 0; j < seen; ++j) e[j] -= max;
    exp_in_place(e, seen);
    const double inv = 1.0 / lanes_sum(e, seen);
    for (int64_t j = 0; j < seen; ++j) si[j] = T(e[j] * inv);
    for (int64_t j = seen; j < x.lk; ++j) si[j] = T(0);
  }
}

// fp64, query rows [q0, q0 + rows) of head h of batch b: scores = q k^T (Eigen, in `scores`),
// the softmax, then P v into the output rows.
void attend_rows(const Heads<double>& x, int64_t b, int64_t h, int64_t q0, int64_t rows,
                 double* scores) {
  using Strided = Eigen::Map<const RowMatrix<double>, 0, Eigen::OuterStride<>>;
  const double* qh = x.q + (b * x.lq + q0) * x.q_row + h * x.dh;
  const double* kh = x.k + b * x.lk * x.k_row + h * x.dh;
  const double* vh = x.v + b * x.lk * x.v_row + h * x.dv;
  Eigen::Map<RowMatrix<double>> s(scores, rows, x.lk);
  s.noalias() = Strided(qh, rows, x.dh, Eigen::OuterStride<>(x.q_row)) *
                Strided(kh, x.lk, x.dh, Eigen::OuterStride<>(x.k_row)).transpose();
  softmax_rows(x, b, q0, rows, scores);
  Eigen::Map<RowMatrix<double>, 0, Eigen::OuterStride<>> o(
      x.out + (b * x.lq + q0) * x.out_row + h * x.dv, rows, x.dv, Eigen::OuterStride<>(x.out_row));
  o.noalias() = s * Strided(vh, x.lk, x.dv, Eigen::OuterStride<>(x.v_row));
}

// fp32, head h of batch b, on sgemm::attend_head (K^T and V packed once, the queries in blocks
// whose scores stay in L2) with the softmax above. With `parallel_blocks` the blocks run on the
// team (a VAE's one head).
void attend_head(const Heads<float>& x, int64_t b, int64_t h, bool parallel_blocks) {
  sgemm::attend_head({x.q + b * x.lq * x.q_row + h * x.dh, x.k + b * x.lk * x.k_row + h * x.dh,
                      x.v + b * x.lk * x.v_row + h * x.dv, x.out + b * x.lq * x.out_row + h * x.dv,
                      x.lq, x.lk, x.dh, x.dv, x.q_row, x.k_row, x.v_row, x.out_row},
                     parallel_blocks, [&](int64_t q0, int64_t rows, float* scores) {
                       softmax_rows(x, b, q0, rows, scores);
                     });
}

}  // namespace

// fp32: one head at a time in blocks of queries (attend_head): many heads, a head per thread; fewer
// heads than threads (a VAE's one head), the heads in turn, each one's blocks on every thread.
// fp64: query rows in blocks of at most kScoreBudget scores, so the [Lq, Lk] matrix is never held
// whole (a VAE's 16384 positions at 1024^2 would take 2 GiB), a head per thread (Eigen's
// products, serial there, would otherwise split rows by the team size, and their bits with
// them). Either way each row's arithmetic is the same.
template <class T>
Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                            const OpAttrs& a) {
  TP_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3 && q.dim(0) == k.dim(0) &&
               k.dim(0) == v.dim(0) && k.dim(1) == v.dim(1) && q.dim(2) == k.dim(2) &&
               q.dim(2) % a.heads == 0 && v.dim(2) % a.heads == 0 && k.dim(1) > 0,
           "attention: q " + shape_string(q.shape()) + ", k " + shape_string(k.shape()) + ", v " +
               shape_string(v.shape()) + ", " + std::to_string(a.heads) + " heads");
  const int64_t batch = q.dim(0), lq = q.dim(1), lk = k.dim(1), heads = a.heads;
  if (mask)
    TP_CHECK((mask->rank() == 2 || (mask->rank() == 3 && mask->dim(0) == batch)) &&
                 mask->dim(mask->rank() - 2) == lq && mask->dim(mask->rank() - 1) == lk,
             "attention mask " + shape_string(mask->shape()) + " for " + std::to_string(lq) +
                 " queries and " + std::to_string(lk) + " keys");
  Tensor out(dtype_of<T>(), {batch, lq, heads * (v.dim(2) / heads)});
  const Heads<T> x{q.data<T>(),
                   k.data<T>(),
                   v.data<T>(),
                   mask ? mask->data<T>() : nullptr,
                   out.data<T>(),
                   lq,
                   lk,
                   q.dim(2) / heads,
                   v.dim(2) / heads,
                   q.dim(2),
                   k.dim(2),
                   v.dim(2),
                   out.dim(2),
                   mask && mask->rank() == 3 ? lq * lk : 0,
                   &a};
  const bool parallel = batch * lq * lk * q.dim(2) >= kParallelMacs;
  if constexpr (std::is_same_v<T, float>) {
    if (batch * heads < omp_get_max_threads()) {
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h) attend_head(x, b, h, true);
      return out;
    }
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h) attend_head(x, b, h, false);
  } else {
    const int64_t block = std::clamp<int64_t>(kScoreBudget / lk, 1, lq);
#pragma omp parallel if (parallel)
    {
      std::vector<T> scores(static_cast<std::size_t>(block * lk));
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t q0 = 0; q0 < lq; q0 += block)
            attend_rows(x, b, h, q0, std::min(block, lq - q0), scores.data());
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
  const T* pg = gamma ? gamma->data<T>() : nullptr;
  const T* pb = beta ? beta->data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = px + r * n;
    const auto [center, inv] = stats(xr);
    for (int64_t i = 0; i < n; ++i) {
      double y = (double(xr[i]) - center) * inv;
      if (pg) y = y * double(pg[i]);
      if (pb) y = y + double(pb[i]);
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
