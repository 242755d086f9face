// Single-head attention over channels-last q, k, v [B, H, W, C] (tokens = H*W), blocked over
// queries: each block's scores, softmax (fp32, max subtracted) and P*V are done before the
// next, so memory is one block of scores, never N x N. The products are sgemm's, whose bits do
// not depend on how many threads run them (Eigen's parallel GEMM picks its kernels by the rows
// each thread gets, so its bits change with the OpenMP team size). Under attn=act (`operands`
// f16/bf16) q, k, v and the normalized weights P are rounded to it before the products.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"

namespace tp::compiled::emulated {
namespace {
constexpr int64_t kQueryBlock = 64;
}  // namespace

Tensor attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale,
                 bool no_max, DType activation, DType operands) {
  const RoundedOperand rq(q_in, operands), rk(k_in, operands), rv(v_in, operands);
  const Tensor &q = rq.get(), &k = rk.get(), &v = rv.get();
  const int64_t b = q.dim(0), n = q.dim(1) * q.dim(2), c = q.dim(3), cv = v.dim(3);
  Tensor out = Tensor::uninitialized(DType::kF32, {q.dim(0), q.dim(1), q.dim(2), cv});
  const float s = float(scale);
  std::vector<float> scores(std::size_t(kQueryBlock * n));
  for (int64_t bi = 0; bi < b; ++bi) {
    const float *Q = q.data<float>() + bi * n * c, *K = k.data<float>() + bi * n * c,
                *V = v.data<float>() + bi * n * cv;
    float* O = out.data<float>() + bi * n * cv;
    for (int64_t q0 = 0; q0 < n; q0 += kQueryBlock) {
      const int64_t rows = std::min(kQueryBlock, n - q0);
      // S [rows, n] = Q[q0 : q0 + rows] K^T: K's rows are B's columns.
      sgemm::gemm(rows, n, c, {Q + q0 * c, c, 1}, sgemm::pack_strided({K, 1, c}),
                  {scores.data(), n, 1});
#pragma omp parallel for schedule(static) if (rows * n >= kParallelElements)
      for (int64_t r = 0; r < rows; ++r) {
        float* row = scores.data() + r * n;
        float m = 0;
        if (!no_max) {
          m = -INFINITY;
          for (int64_t j = 0; j < n; ++j) m = std::max(m, row[j] * s);
        }
        float sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          float e = std::exp(row[j] * s - m);
          if (no_max)
            e = round_to(activation, e);  // a naive kernel feeds exp(s) to a low-precision P*V GEMM
          row[j] = e;
          sum += e;
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; ++j) row[j] = round_to(operands, row[j] * inv);
      }
      sgemm::gemm(rows, cv, n, {scores.data(), n, 1}, sgemm::pack_strided({V, cv, 1}),
                  {O + q0 * cv, cv, 1});
    }
  }
  return out;
}

}  // namespace tp::compiled::emulated
