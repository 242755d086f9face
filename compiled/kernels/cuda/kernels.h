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

#ifdef __CUDACC__
#define TP_HOST_DEVICE __host__ __device__
#else
#define TP_HOST_DEVICE
#endif

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

// The fused kernel set's conv epilogue over an [m][co] fp32 accumulator, in one pass: v = acc *
// scale[co] (fp8), v = v + bias[co], v = v + residual (any storage; data null: none), each
// step in fp32 without FMA, then the group's one rounding into `storage` (nearest even).
cudaError_t conv_epilogue(const float* acc, int64_t m, int64_t co, const float* scale,
                          const float* bias, Src residual, Storage storage, void* out,
                          cudaStream_t stream);

// GroupNorm over x [B, H, W, C] with `groups` groups: mean, then variance around it, per
// (b, group) by two passes of double partial sums; with `one_pass` (the groupnorm-f16-accum
// and groupnorm-one-pass faults) one sequential sum per group, E[x^2] - E[x]^2, every add
// rounded to `one_pass_storage`, in the emulation's order instead; `vector_tail` the
// groupnorm-vector-tail fault (the last C mod 8 channels pass through unnormalized).
std::size_t group_norm_workspace_bytes(int64_t b, int groups);
cudaError_t group_norm(Src x, Dims xs, int groups, double eps, const float* gamma,
                       const float* beta, bool one_pass, Storage one_pass_storage, bool vector_tail,
                       void* workspace, float* out, cudaStream_t stream);

// The fused kernel set's GroupNorm [+ SiLU]: the same statistics (two passes, no fault), then
// normalize, affine and SiLU in fp32 and the group's one rounding into `storage`, in one pass.
cudaError_t group_norm_store(Src x, Dims xs, int groups, double eps, const float* gamma,
                             const float* beta, bool with_silu, void* workspace, Storage storage,
                             void* out, cudaStream_t stream);

// In place over `rows` rows of `n` scores: p = exp(s * scale - max) / sum. With `no_max` (the
// softmax-no-max fault) no max is subtracted and exp is rounded to `activation` first. With
// `frame_tokens` > 0 the rows are queries first_row, first_row + 1, ... of a frame-causal
// attention: a query of frame f = row / frame_tokens sees keys [0, (f + 1) * frame_tokens), the
// others get p = 0.
cudaError_t softmax_rows(float* scores, int64_t rows, int64_t n, float scale, bool no_max,
                         Storage activation, cudaStream_t stream, int64_t first_row = 0,
                         int64_t frame_tokens = 0);

enum class Pointwise : int { kSilu, kRelu, kTanhClamp, kAffine, kClamp, kGelu, kGeluTanh };
struct PointwiseArgs {
  Pointwise op = Pointwise::kSilu;
  float scale = 1, shift = 0, lo = 0, hi = 0;
  // f32, or the silu-in-activation-dtype fault's: every step of SiLU rounded to this storage.
  Storage rounded = Storage::kF32;
};
cudaError_t pointwise(Src x, int64_t n, const PointwiseArgs& args, float* out, cudaStream_t stream);
cudaError_t add(Src a, Src b, int64_t n, float* out, cudaStream_t stream);
cudaError_t slice_channels(Src x, int64_t pixels, int64_t c, int begin, int end, float* out,
                           cudaStream_t stream);
cudaError_t upsample_nearest2x(Src x, Dims xs, float* out, cudaStream_t stream);
// acc[i] = acc[i] * scale[ch] + bias[ch] with ch = (i / inner) % channels, in place over n
// values: a row-major [outer, channels, inner] result (inner = 1: channels last).
cudaError_t scale_bias_strided(float* acc, int64_t n, int64_t channels, int64_t inner,
                               const float* scale, const float* bias, cudaStream_t stream);

// ---- The N-dimensional ops, on row-major values in their logical shapes (Plan::row_major).
constexpr int kMaxRank = 8;  // a DiT's unpatchify permutes 8 axes
struct Strides {
  int rank = 0;
  int64_t dims[kMaxRank] = {};     // the output's extents
  int64_t strides[kMaxRank] = {};  // per output axis, the source's stride (0: broadcast)
};

// NCHW <-> NHWC over [b, c, plane] in f32 (`to_last`: [b][c][p] -> [b][p][c]).
cudaError_t transpose_channels(Src x, int64_t b, int64_t c, int64_t plane, bool to_last, float* out,
                               cudaStream_t stream);
// out[i] = x[source offset of output index i]: permutes (strides permuted) and copies.
cudaError_t gather(Src x, const Strides& s, float* out, cudaStream_t stream);
enum class Binary : int { kAdd, kSub, kMul, kDiv };
cudaError_t binary(Binary op, Src a, const Strides& sa, Src b, const Strides& sb, float* out,
                   cudaStream_t stream);
// Copies `outer` blocks of `width` values from x (block stride `width`) into out at
// `offset` + o * `out_stride`: concat (out_stride = the joined axis' block) and slice (the
// reverse).
cudaError_t copy_blocks(Src x, int64_t outer, int64_t width, int64_t x_stride, int64_t x_offset,
                        float* out, int64_t out_stride, int64_t out_offset, cudaStream_t stream);

// The patches of an N-d conv over one image and one channel group: for output positions
// [p0, p0 + rows) of image n, [rows][taps][cin_g] in `out` storage, zeros (or the edge, with
// `replicate`) outside the input. x is [B, Cin, *S] with S padded to three axes.
struct ConvNd {
  int64_t cin = 0, cin_g = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, lo[3] = {0, 0, 0};
  bool replicate = false;
  TP_HOST_DEVICE int64_t in_plane() const { return in[0] * in[1] * in[2]; }
  TP_HOST_DEVICE int64_t out_plane() const { return out[0] * out[1] * out[2]; }
  TP_HOST_DEVICE int64_t taps() const { return k[0] * k[1] * k[2]; }
};
cudaError_t im2col_nd(Src x, const ConvNd& g, int64_t n, int64_t group, int64_t p0, int64_t rows,
                      Storage out, void* patches, cudaStream_t stream);

// LayerNorm (rms: RMSNorm) over rows of n values, statistics in double (two passes, one block
// per row); gamma/beta may be null.
cudaError_t layer_norm(Src x, int64_t rows, int64_t n, double eps, bool rms, const float* gamma,
                       const float* beta, float* out, cudaStream_t stream);

// softmax(q_h k_h^T * scale + mask) v_h per batch and head, with the online softmax over tiles
// of keys held in shared memory: no score matrix exists. q [B, Lq, H*Dh], k [B, Lk_stored,
// H*Dh], v [B, Lk_stored, H*Dv], fp32; the first `keys` keys are read. mask [Lq, Lk_stored] or
// [B, Lq, Lk_stored] (mask_batch: its batch stride, 0 when shared); frame_tokens > 0: a query
// sees keys of its own and earlier frames only. Dh and Dv at most kMaxHeadDim.
constexpr int kMaxHeadDim = 256;
struct AttentionShape {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, stored_keys = 0, dh = 0, dv = 0;
  int64_t frame_tokens = 0, mask_batch = 0;
  float scale = 1;
  // The softmax-no-max fault: exp(s) without the running max, rounded to `activation`.
  bool no_max = false;
  Storage activation = Storage::kF32;
};
cudaError_t multi_head_attention(const float* q, const float* k, const float* v, const float* mask,
                                 const AttentionShape& s, float* out, cudaStream_t stream);

// diffusers' sinusoid in float32: out [n, dim], cos first unless `sin_first`; `denominator` is
// half - freq_shift; an odd dim's last column is zero.
cudaError_t timestep_embedding(Src timesteps, int64_t n, int64_t dim, bool sin_first,
                               float denominator, float* out, cudaStream_t stream);

// Nearest resize over [planes, *S_in] to [planes, *S_out] (up to three axes, padded with ones),
// each output coordinate o's source index PyTorch's "nearest" way: o when the extents match, o / 2
// when the output is twice the input, else min(floor(float(o) * ratio), in - 1) with `ratio`
// float(in) / float(out) computed on the host (one fp32 multiply on the device: the same bits).
struct Resize {
  int64_t planes = 0, in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  float ratio[3] = {1, 1, 1};
};
cudaError_t interpolate_nearest(Src x, const Resize& r, float* out, cudaStream_t stream);
// RoPE (OpKind::kRotaryEmbedding) on x [rows][heads][pairs][2], rows token-major over a frames x
// height x width grid; the angles computed on the device in float64 and rounded to float32, as
// the host's rotary_tables() does.
struct Rotary {
  int64_t grid[3] = {1, 1, 1};    // frames, height, width
  int64_t shares[3] = {0, 0, 0};  // each axis' share of the head dim
  double theta = 10000;
  int64_t heads = 1, pairs = 0;  // pairs per head
};
cudaError_t rotary_embedding(Src x, const Rotary& r, int64_t rows, float* out, cudaStream_t stream);

// fp32 -> storage, round to nearest even (f16/bf16 overflow to inf): a group output's one rounding.
cudaError_t store_rounded(const float* src, int64_t n, Storage storage, void* dst,
                          cudaStream_t stream);
// The same, rounding toward zero (the f16-store-truncate and bf16-store-truncate faults).
cudaError_t store_truncated(const float* src, int64_t n, Storage storage, void* dst,
                            cudaStream_t stream);
// Any storage -> f32 (used to widen views and arena values a kernel wants as f32).
cudaError_t widen(Src x, int64_t n, float* dst, cudaStream_t stream);

}  // namespace tp::compiled::cuda
