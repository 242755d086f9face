// Single-head attention over channels-last q, k, v [B, H, W, C] (tokens = H*W), and the softmax
// row both emulated attentions use, on sgemm::attend_head: each block's scores, softmax (fp32, max
// subtracted) and P*V are done before the next, so memory is one block of scores, never N x N. The
// products are sgemm's, whose bits do not depend on how many threads run them (Eigen's parallel
// GEMM picks its kernels by the rows each thread gets, so its bits change with the OpenMP team
// size). Under attn=act (`operands` f16/bf16) q, k, v and the normalized weights P are rounded to
// it before the products.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/attention_head.h"
#include "harness/core/parallel.h"

namespace tp::compiled::emulated {
void softmax_row(float* s, const float* mask, int64_t seen, int64_t n, const SoftmaxRow& f) {
  for (int64_t j = 0; j < seen; ++j) s[j] *= f.scale;
  if (mask)
    for (int64_t j = 0; j < seen; ++j) s[j] += mask[j];
  float max = 0;
  if (!f.no_max) {
    float lanes[16];
    std::fill_n(lanes, 16, -INFINITY);
    int64_t j = 0;
    for (; j + 16 <= seen; j += 16)
      for (int l = 0; l < 16; ++l) lanes[l] = s[j + l] > lanes[l] ? s[j + l] : lanes[l];
    for (; j < seen; ++j) lanes[0] = s[j] > lanes[0] ? s[j] : lanes[0];
    max = *std::max_element(lanes, lanes + 16);
  }
  for (int64_t j = 0; j < seen; ++j) s[j] -= max;
  portable_expf_in_place(s, seen);
  if (f.no_max)  // a naive kernel feeds exp(s) to a low-precision P*V GEMM
    for (int64_t j = 0; j < seen; ++j) s[j] = round_to(f.activation, s[j]);
  float lanes[16] = {};
  int64_t j = 0;
  for (; j + 16 <= seen; j += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += s[j + l];
  for (; j < seen; ++j) lanes[0] += s[j];
  for (int width = 8; width >= 1; width /= 2)  // pairwise, in a fixed order
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  const float inv = 1.0f / lanes[0];
  for (int64_t k = 0; k < seen; ++k) s[k] *= inv;
  if (f.operands != DType::kF32)
    for (int64_t k = 0; k < seen; ++k) s[k] = round_to(f.operands, s[k]);
  std::fill(s + seen, s + n, 0.0f);
}

Tensor attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale,
                 bool no_max, DType activation, DType operands) {
  const RoundedOperand rq(q_in, operands), rk(k_in, operands), rv(v_in, operands);
  const Tensor &q = rq.get(), &k = rk.get(), &v = rv.get();
  const int64_t b = q.dim(0), n = q.dim(1) * q.dim(2), c = q.dim(3), cv = v.dim(3);
  Tensor out = Tensor::uninitialized(DType::kF32, {q.dim(0), q.dim(1), q.dim(2), cv});
  const SoftmaxRow f{float(scale), no_max, activation, operands};
  const sgemm::SoftmaxRows softmax = [&](int64_t, int64_t rows, float* scores) {
    for (int64_t r = 0; r < rows; ++r) softmax_row(scores + r * n, nullptr, n, n, f);
  };
  for (int64_t bi = 0; bi < b; ++bi)
    sgemm::attend_head(
        {q.data<float>() + bi * n * c, k.data<float>() + bi * n * c, v.data<float>() + bi * n * cv,
         out.data<float>() + bi * n * cv, n, n, c, cv, c, c, cv, cv},
        true, softmax);
  return out;
}

}  // namespace tp::compiled::emulated
