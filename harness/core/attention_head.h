// One head of softmax(Q K^T) V in fp32 on sgemm, the blocking both CPU executors' attentions share
// (each brings its own softmax): K^T and V packed once per head, the queries in blocks whose
// scores stay in L2, each block's scores Q K^T, the caller's softmax turning them into weights in
// place, then the weights times V into the output rows; never the [Lq, Lk] matrix, and K and V
// are not packed again per block. The products' bits do not depend on the blocks or the threads.
#pragma once

#include <cstdint>
#include <functional>

namespace tp::sgemm {

// Rows of q [lq, dh], k [lk, dh], v [lk, dv] and out [lq, dv] lie `*_row` floats apart.
struct Head {
  const float *q, *k, *v;
  float* out;
  int64_t lq, lk, dh, dv, q_row, k_row, v_row, out_row;
};
// Turns scores [rows, lk] (row-major) of queries [q0, q0 + rows) into weights, in place.
using SoftmaxRows = std::function<void(int64_t q0, int64_t rows, float* scores)>;

// With `parallel_blocks` the blocks run on the OpenMP team (one head at a time: a VAE's); else on
// the calling thread (a head per thread). lk >= 1.
void attend_head(const Head& x, bool parallel_blocks, const SoftmaxRows& softmax);

}  // namespace tp::sgemm
