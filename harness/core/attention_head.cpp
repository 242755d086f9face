#include "harness/core/attention_head.h"

#include <algorithm>
#include <vector>

#include "harness/core/sgemm.h"

namespace tp::sgemm {
namespace {
constexpr int64_t kL2Scores = int64_t(1) << 17;  // one block's scores: 512 KiB, in L2
}  // namespace

void attend_head(const Head& x, bool parallel_blocks, const SoftmaxRows& softmax) {
  // thread_local: a model's many heads reuse the memory; the references are shared with the team.
  thread_local PackedB keys_of_thread, values_of_thread;
  PackedB &keys = keys_of_thread, &values = values_of_thread;
  keys.pack(x.dh, x.lk, pack_strided({x.k, 1, x.k_row}));  // K's rows are B's columns
  values.pack(x.lk, x.dv, pack_strided({x.v, x.v_row, 1}));
  const int64_t per_block = kL2Scores / std::max<int64_t>(1, x.lk) / kMr * kMr;
  const int64_t block = std::min(x.lq, std::max(kMr, per_block));
  const int64_t blocks = block > 0 ? (x.lq + block - 1) / block : 0;
#pragma omp parallel for schedule(static) if (parallel_blocks && blocks > 1)
  for (int64_t i = 0; i < blocks; ++i) {
    thread_local std::vector<float> scores;
    const int64_t q0 = i * block, rows = std::min(block, x.lq - q0);
    if (int64_t(scores.size()) < rows * x.lk) scores.resize(std::size_t(rows * x.lk));
    gemm(rows, {x.q + q0 * x.q_row, x.q_row, 1}, keys, {scores.data(), x.lk, 1});
    softmax(q0, rows, scores.data());
    gemm(rows, {scores.data(), x.lk, 1}, values, {x.out + q0 * x.out_row, x.out_row, 1});
  }
}

}  // namespace tp::sgemm
