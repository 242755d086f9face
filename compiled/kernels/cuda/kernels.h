// The compiled path's CUDA kernels: the device side of each fused group. They follow the same
// numerics contract as the emulation (compiled/kernels/emulated): inputs are read in their
// storage dtype and widened to fp32, everything inside a group is fp32 (GroupNorm statistics
// in double), and only the group's outputs are rounded, once, by store_rounded. Activations are
// channels-last [B, H, W, C]. The GEMMs (conv, linear, attention) go through cuBLAS from the
// backend; these are the kernels around them.
// Every launcher returns the launch's status (cudaGetLastError()); the backend checks it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tp::compiled::cuda {

enum class Storage : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
struct Src {
  const void* data = nullptr;
  Storage storage = Storage::kF32;
};
struct Dims {
  int64_t b = 0, h = 0, w = 0, c = 0;
  int64_t numel() const { return b * h * w * c; }
};

// 0: none, 1: nearest 2x, 2: nearest 2x off by one (the upsample-off-by-one fault).
enum class Upsample : int { kNone = 0, kNearest2x = 1, kNearest2xOffByOne = 2 };

struct ConvGeometry {
  int kh = 1, kw = 1, stride = 1, pad_top = 0, pad_left = 0;
  int64_t hin = 0, win = 0;  // the (possibly upsampled) input extent the taps index
  int64_t ho = 0, wo = 0;
};

// Patches of output rows [y0, y0 + rows) of image n, [rows * wo][kh * kw * c] in `out` storage
// (f32, f16 or bf16; the source values are exact in it), zero outside the input.
cudaError_t im2col(Src x, Dims xs, int64_t n, int64_t y0, int64_t rows, const ConvGeometry& g,
                   Upsample up, Storage out, void* patches, cudaStream_t stream);
// acc[m][co] = acc[m][co] * scale[co] + bias[co] (either may be null), in place.
cudaError_t scale_bias(float* acc, int64_t m, int64_t co, const float* scale, const float* bias,
                       cudaStream_t stream);

// GroupNorm over x [B, H, W, C] with `groups` groups: mean, then variance around it, per
// (b, group) by two passes of double partial sums; with `f16_accumulation` (the
// groupnorm-f16-accum fault) one sequential f16 sum per group in the emulation's order instead.
std::size_t group_norm_workspace_bytes(int64_t b, int groups);
cudaError_t group_norm(Src x, Dims xs, int groups, double eps, const float* gamma,
                       const float* beta, bool f16_accumulation, void* workspace, float* out,
                       cudaStream_t stream);

// In place over `rows` rows of `n` scores: p = exp(s * scale - max) / sum. With `no_max` (the
// softmax-no-max fault) no max is subtracted and exp is rounded to `activation` first.
cudaError_t softmax_rows(float* scores, int64_t rows, int64_t n, float scale, bool no_max,
                         Storage activation, cudaStream_t stream);

enum class Pointwise : int { kSilu, kRelu, kTanhClamp, kAffine, kClamp };
struct PointwiseArgs {
  Pointwise op = Pointwise::kSilu;
  float scale = 1, shift = 0, lo = 0, hi = 0;
};
cudaError_t pointwise(Src x, int64_t n, const PointwiseArgs& args, float* out, cudaStream_t stream);
cudaError_t add(Src a, Src b, int64_t n, float* out, cudaStream_t stream);
cudaError_t slice_channels(Src x, int64_t pixels, int64_t c, int begin, int end, float* out,
                           cudaStream_t stream);
cudaError_t upsample_nearest2x(Src x, Dims xs, float* out, cudaStream_t stream);
// fp32 -> storage, round to nearest even (f16/bf16 overflow to inf): a group output's one rounding.
cudaError_t store_rounded(const float* src, int64_t n, Storage storage, void* dst,
                          cudaStream_t stream);
// Any storage -> f32 (used to widen views and arena values a kernel wants as f32).
cudaError_t widen(Src x, int64_t n, float* dst, cudaStream_t stream);

}  // namespace tp::compiled::cuda
