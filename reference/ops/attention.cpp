// Single-head scaled dot-product attention over the H*W positions with head dim = channels,
// as diffusers' VAE mid-block Attention (heads=1, dim_head=C). Linear layers act on the
// channel dim. Queries are processed in blocks so the N x N score matrix is never held whole
// (at 1024^2 images N = 16384; the full matrix would be 1 GiB in fp32).
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "reference/ops/ops.h"

namespace tp::ref {
namespace {

template <class T>
using ColMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr int64_t kScoreBudget = 1 << 22;  // elements of one block of scores

}  // namespace

template <class T>
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t batch = x.dim(0), cin = x.dim(1), n = x.dim(2) * x.dim(3), cout = weight.dim(0);
  TP_CHECK(weight.dim(1) == cin, "linear input channels");
  Tensor out = Tensor::uninitialized(dtype_of<T>(), {batch, cout, x.dim(2), x.dim(3)});
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t b = 0; b < batch; ++b)  // y [cout, N] = W [cout, cin] x [cin, N] + b
      sgemm::gemm(cout, n, cin, {weight.data<float>(), cin, 1},
                  sgemm::pack_strided({x.data<float>() + b * cin * n, n, 1}),
                  {out.data<float>() + b * cout * n, n, 1}, bias.data<float>());
    return out;
  }
  Eigen::Map<const RowMatrix<T>> w(weight.data<T>(), cout, cin);
  for (int64_t b = 0; b < batch; ++b) {
    // NCHW [C, N] row-major: tokens are columns. y = W x + b.
    Eigen::Map<RowMatrix<T>> y(out.data<T>() + b * cout * n, cout, n);
    y.noalias() = w * Eigen::Map<const RowMatrix<T>>(x.data<T>() + b * cin * n, cin, n);
    const T* bv = bias.data<T>();
    for (int64_t c = 0; c < cout; ++c) y.row(c).array() += bv[c];
  }
  return out;
}

template <class T>
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  const int64_t batch = q.dim(0), c = q.dim(1), n = q.dim(2) * q.dim(3);
  Tensor out = Tensor::uninitialized(dtype_of<T>(), q.shape());
  const int64_t block = std::clamp<int64_t>(kScoreBudget / n, 1, n);
  RowMatrix<T> scores(block, n);
  for (int64_t b = 0; b < batch; ++b) {
    // [C, N] row-major storage is the [N, C] column-major token matrix.
    Eigen::Map<const ColMatrix<T>> qm(q.data<T>() + b * c * n, n, c);
    Eigen::Map<const ColMatrix<T>> km(k.data<T>() + b * c * n, n, c);
    Eigen::Map<const ColMatrix<T>> vm(v.data<T>() + b * c * n, n, c);
    Eigen::Map<ColMatrix<T>> om(out.data<T>() + b * c * n, n, c);
    for (int64_t r0 = 0; r0 < n; r0 += block) {
      const int64_t rows = std::min(block, n - r0);
      auto s = scores.topRows(rows);
      if constexpr (std::is_same_v<T, float>)  // [rows, N]: query rows of the [C, N] storage
        sgemm::gemm(rows, n, c, {qm.data() + r0, 1, n}, sgemm::pack_strided({km.data(), n, 1}),
                    {s.data(), n, 1});
      else
        s.noalias() = qm.middleRows(r0, rows) * km.transpose();
#pragma omp parallel for schedule(static) if (rows * n >= kParallelElements)
      for (int64_t r = 0; r < rows; ++r) {
        T* row = s.row(r).data();
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, double(row[j]) * scale);
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double e = std::exp(double(row[j]) * scale - mx);
          row[j] = T(e);
          sum += e;
        }
        const double inv = 1.0 / sum;
        for (int64_t j = 0; j < n; ++j) row[j] = T(double(row[j]) * inv);
      }
      if constexpr (std::is_same_v<T, float>)  // [rows, C], stored into the [C, N] output
        sgemm::gemm(rows, c, n, {s.data(), n, 1}, sgemm::pack_strided({vm.data(), 1, n}),
                    {om.data() + r0, 1, n});
      else
        om.middleRows(r0, rows).noalias() = s * vm;
    }
  }
  return out;
}

template Tensor linear<float>(const Tensor&, const Tensor&, const Tensor&);
template Tensor linear<double>(const Tensor&, const Tensor&, const Tensor&);
template Tensor attention<float>(const Tensor&, const Tensor&, const Tensor&, double);
template Tensor attention<double>(const Tensor&, const Tensor&, const Tensor&, double);

}  // namespace tp::ref
