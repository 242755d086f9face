// GroupNorm with statistics wider than fp32: each (b, group) is split over kSplits blocks whose
// double partial sums are combined in a fixed order, so results do not depend on scheduling.
// group_norm writes fp32 (the group's SiLU then runs as a pointwise kernel); group_norm_store,
// the fused kernel set's, applies the SiLU and the group's one rounding in the same pass.
#include "compiled/kernels/cuda/device_io.cuh"

namespace tp::compiled::cuda {
namespace {

constexpr int kSplits = 64;

struct Layout {
  int64_t pixels, c, cpg;
  int groups;
  int64_t vectors = -1;  // the groupnorm-vector-tail fault: channels from here pass through
};

// blockIdx.y = b * groups + g, blockIdx.x = split. With `sums` (the first pass's partials) the
// block sums squared deviations from the mean instead of values.
__global__ void partial_sums(Src x, Layout l, const double* sums, double* out) {
  const int64_t bg = blockIdx.y, n = bg / l.groups, g = bg % l.groups;
  const double count = double(l.pixels * l.cpg);
  double mean = 0;
  if (sums) {
    for (int s = 0; s < kSplits; ++s) mean += sums[bg * kSplits + s];
    mean /= count;
  }
  const int64_t per = (l.pixels + kSplits - 1) / kSplits, p0 = blockIdx.x * per,
                p1 = min(l.pixels, p0 + per);
  const int64_t elements = (p1 > p0 ? p1 - p0 : 0) * l.cpg;
  double acc = 0;
  for (int64_t e = threadIdx.x; e < elements; e += blockDim.x) {
    const int64_t p = p0 + e / l.cpg, j = e % l.cpg;
    const double v = load(x, (n * l.pixels + p) * l.c + g * l.cpg + j);
    acc += sums ? (v - mean) * (v - mean) : v;
  }
  const double total = block_sum(acc);
  if (threadIdx.x == 0) out[bg * kSplits + blockIdx.x] = total;
}

__global__ void finalize(const double* sums, const double* squares, Layout l, double eps,
                         int64_t bgs, float* stats) {
  const int64_t bg = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (bg >= bgs) return;
  const double count = double(l.pixels * l.cpg);
  double s = 0, ss = 0;
  for (int i = 0; i < kSplits; ++i) s += sums[bg * kSplits + i];
  for (int i = 0; i < kSplits; ++i) ss += squares[bg * kSplits + i];
  stats[2 * bg] = float(s / count);
  stats[2 * bg + 1] = float(1.0 / sqrt(ss / count + eps));
}

// The groupnorm-f16-accum and groupnorm-one-pass faults: one thread per (b, group) sums in `acc`
// (f16 or f32), in the emulation's order.
__global__ void one_pass_statistics(Src x, Layout l, double eps, int64_t bgs, Storage acc,
                                    float* stats) {
  const int64_t bg = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (bg >= bgs) return;
  const int64_t n = bg / l.groups, g = bg % l.groups;
  const double count = double(l.pixels * l.cpg);
  float s = 0, ss = 0;
  for (int64_t p = 0; p < l.pixels; ++p)
    for (int64_t j = 0; j < l.cpg; ++j) {
      const float v = load(x, (n * l.pixels + p) * l.c + g * l.cpg + j);
      s = round_to(acc, s + v);
      ss = round_to(acc, ss + round_to(acc, v * v));
    }
  const float mean = float(s / count);
  stats[2 * bg] = mean;
  stats[2 * bg + 1] = 1.0f / sqrtf(float(ss / count) - mean * mean + float(eps));
}

// Element i, of channel ch in (batch, group) bg, normalized and affine, in the emulation's order.
__device__ __forceinline__ float affine(Src x, int64_t i, int64_t ch, int64_t bg,
                                        const float* stats, const float* gamma, const float* beta) {
  return (load(x, i) - stats[2 * bg]) * stats[2 * bg + 1] * gamma[ch] + beta[ch];
}

__device__ __forceinline__ float normalized(Src x, const Layout& l, int64_t i, const float* stats,
                                            const float* gamma, const float* beta) {
  const int64_t ch = i % l.c, n = i / (l.pixels * l.c);
  if (l.vectors >= 0 && ch >= l.vectors) return load(x, i);
  return affine(x, i, ch, n * l.groups + ch / l.cpg, stats, gamma, beta);
}

__global__ void normalize(Src x, Layout l, int64_t total, const float* stats, const float* gamma,
                          const float* beta, float* out) {
  TP_GRID_STRIDE(i, total) out[i] = normalized(x, l, i, stats, gamma, beta);
}

// Eight consecutive channels of one pixel per thread (c a multiple of 8): one index division
// per eight elements; the arithmetic per element is affine()'s, as in normalized().
constexpr int kVector = 8;
__global__ void normalize_store(Src x, Layout l, int64_t total, const float* stats,
                                const float* gamma, const float* beta, bool with_silu,
                                Storage storage, void* out) {
  TP_GRID_STRIDE(v, total / kVector) {
    const int64_t i0 = v * kVector, ch0 = i0 % l.c, n = i0 / (l.pixels * l.c);
    const int64_t g0 = n * l.groups;
#pragma unroll
    for (int j = 0; j < kVector; ++j) {
      const int64_t ch = ch0 + j;
      const float y = affine(x, i0 + j, ch, g0 + ch / l.cpg, stats, gamma, beta);
      store(out, storage, i0 + j, with_silu ? silu(y) : y);
    }
  }
}

__global__ void normalize_store_scalar(Src x, Layout l, int64_t total, const float* stats,
                                       const float* gamma, const float* beta, bool with_silu,
                                       Storage storage, void* out) {
  TP_GRID_STRIDE(i, total) {
    const float v = normalized(x, l, i, stats, gamma, beta);
    store(out, storage, i, with_silu ? silu(v) : v);
  }
}

// Mean and 1/sd per (b, group) into the workspace's stats; returns them.
float* statistics(Src x, const Layout& l, int64_t b, double eps, bool one_pass,
                  Storage one_pass_storage, void* workspace, cudaStream_t stream) {
  const int64_t bgs = b * l.groups;
  double* sums = static_cast<double*>(workspace);
  double* squares = sums + bgs * kSplits;
  float* stats = reinterpret_cast<float*>(squares + bgs * kSplits);
  const unsigned per_group_blocks = unsigned((bgs + kThreads - 1) / kThreads);
  if (one_pass) {
    one_pass_statistics<<<per_group_blocks, kThreads, 0, stream>>>(x, l, eps, bgs, one_pass_storage,
                                                                   stats);
  } else {
    const dim3 grid(kSplits, unsigned(bgs));
    partial_sums<<<grid, kThreads, 0, stream>>>(x, l, nullptr, sums);
    partial_sums<<<grid, kThreads, 0, stream>>>(x, l, sums, squares);
    finalize<<<per_group_blocks, kThreads, 0, stream>>>(sums, squares, l, eps, bgs, stats);
  }
  return stats;
}

}  // namespace

std::size_t group_norm_workspace_bytes(int64_t b, int groups) {
  const std::size_t bgs = std::size_t(b) * std::size_t(groups);
  return 2 * bgs * kSplits * sizeof(double) + 2 * bgs * sizeof(float);
}

cudaError_t group_norm(Src x, Dims xs, int groups, double eps, const float* gamma,
                       const float* beta, bool one_pass, Storage one_pass_storage, bool vector_tail,
                       void* workspace, float* out, cudaStream_t stream) {
  Layout l{xs.h * xs.w, xs.c, xs.c / groups, groups};
  if (vector_tail) l.vectors = xs.c - xs.c % 8;
  const float* stats = statistics(x, l, xs.b, eps, one_pass, one_pass_storage, workspace, stream);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  normalize<<<blocks_for(xs.numel()), kThreads, 0, stream>>>(x, l, xs.numel(), stats, gamma, beta,
                                                             out);
  return cudaGetLastError();
}

cudaError_t group_norm_store(Src x, Dims xs, int groups, double eps, const float* gamma,
                             const float* beta, bool with_silu, void* workspace, Storage storage,
                             void* out, cudaStream_t stream) {
  const Layout l{xs.h * xs.w, xs.c, xs.c / groups, groups};
  const float* stats = statistics(x, l, xs.b, eps, false, Storage::kF32, workspace, stream);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (xs.c % kVector == 0)
    normalize_store<<<blocks_for(xs.numel() / kVector), kThreads, 0, stream>>>(
        x, l, xs.numel(), stats, gamma, beta, with_silu, storage, out);
  else
    normalize_store_scalar<<<blocks_for(xs.numel()), kThreads, 0, stream>>>(
        x, l, xs.numel(), stats, gamma, beta, with_silu, storage, out);
  return cudaGetLastError();
}

}  // namespace tp::compiled::cuda
