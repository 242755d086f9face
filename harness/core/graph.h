// The graph IR: a model's computation as an ordered list of named ops. Op names are diffusers
// module paths (`decoder.up_blocks.2.resnets.1.conv2`); functional steps that have no module
// of their own are named under their parent (`...resnets.1.act1`, `...resnets.1.add`).
// Composite modules (`...resnets.1`, `decoder.mid_block`) are recorded as aliases of the value
// they output, so every diffusers module output is a checkpoint both paths can materialize.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/tensor.h"

namespace tp {

enum class OpKind : uint8_t {
  kGroupNorm,  // affine, biased variance; weight/bias [C]
  kSilu,       // x * sigmoid(x)
  kRelu,
  kTanhClamp,  // tanh(x / scale) * scale  (AutoencoderTiny's latent clamp)
  kAffine,     // x * scale + shift
  kClamp,      // min(max(x, lo), hi)
  // N-dimensional ops (the kinds above assume [B,C,H,W] and one head). Shapes in comments:
  // S = 1 to 3 spatial dims, L = tokens, D = features.
  kConv,                // x [B,Cin,*S]; weight [Cout,Cin/groups,*K]; bias [Cout]?; per-axis
                        // stride, dilation and padding (lo, hi) of mode zeros or replicate
                        // (a causal time axis pads lo = dilation*(k-1), hi = 0)
  kLinearLast,          // over the last dim of x [..., Din]: weight [Dout,Din], bias [Dout]?
  kMultiHeadAttention,  // q [B,Lq,H*Dh], k [B,Lk,H*Dh], v [B,Lk,H*Dv], mask? [Lq,Lk] or
                        // [B,Lq,Lk] added to the scores; frame_tokens > 0: a query sees keys of
                        // its own and earlier frames only (causal per frame)
  kLayerNorm,           // over the last norm_dims dims, biased variance; weight/bias? of that shape
  kRmsNorm,             // x / sqrt(mean(x^2 over the last dim) + eps) * weight?
  kGelu,                // 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation
  kConcat,              // in[0..n) along axis
  kSlice,               // [begin, end) along axis (a split is several slices)
  kReshape,             // to dims (one -1 inferred; 0 keeps the input's dim), or with a second
                        // input and no dims, to that input's shape
  kPermute,             // out dim i = in dim dims[i]
  kBinary,              // in[0] (op) in[1] with numpy broadcasting: add, sub, mul, div
  kTimestepEmbedding,   // timesteps [...] -> [..., dim]: diffusers' sinusoid, always computed in
                        // float32 (cos first when flip_sin_to_cos; freq_shift in `shift`)
  kInterpolateNearest,  // x [B,C,*S] to in[1]'s trailing spatial sizes, or without in[1] to
                        // `scale` (a whole factor) times each: PyTorch's "nearest"
                        // (src = min(floor(dst * float(in/out)), in-1))
  kAddParameter,        // x + the parameter `weight`, numpy broadcasting (a DiT's modulation
                        // table added to the time projection, a learned position embedding)
  kRotaryEmbedding,     // x [B,S,heads*Dh] with S the tokens of in[1]'s trailing 3 axes (a
                        // patch embedding [B,D,F,H,W], frame-major): each head's adjacent pairs
                        // (x[2i], x[2i+1]) rotated by the angle of its axis' position, the axes'
                        // head-dim shares in `dims` (frame, height, width; each even), angle
                        // p * theta^(-2k/dim) computed in float64 and rounded to float32
                        // (diffusers' WanRotaryPosEmbed; theta in `scale`)
  kUnpatchify,          // x [B,S,pt*ph*pw*C] (per token (pt, ph, pw, c), c fastest) with the
                        // token grid of in[1]'s trailing 3 axes -> [B,C,F*pt,H*ph,W*pw]; the
                        // patch in `dims`
};

enum class PadMode : uint8_t { kZeros, kReplicate };
enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };

const char* op_kind_name(OpKind kind);

struct OpAttrs {
  int groups = 0;               // GroupNorm
  double eps = 0;               // GroupNorm
  double scale = 1, shift = 0;  // Affine, TanhClamp, MultiHeadAttention
  double lo = 0, hi = 0;        // Clamp
  int begin = 0, end = 0;       // SliceChannels, Slice (an end <= 0 counts from the axis' end)
  // N-dimensional ops.
  std::vector<int> strides, dilations, pads_lo, pads_hi;  // Conv, one per spatial axis
  PadMode pad_mode = PadMode::kZeros;                     // Conv
  int conv_groups = 1;                                    // Conv
  int axis = 0;                      // Concat, Slice (negative counts from the end)
  std::vector<int64_t> dims;         // Reshape (target), Permute (order), RotaryEmbedding (the
                                     // axes' shares of the head dim), Unpatchify (the patch)
  int heads = 1;                     // MultiHeadAttention, RotaryEmbedding
  int64_t frame_tokens = 0;          // MultiHeadAttention: tokens per frame for the causal mask
                                     // (kFrameTokensOfGrid: from its 4th input's shape)
  int norm_dims = 1;                 // LayerNorm
  bool tanh_approximation = false;   // Gelu
  BinaryOp binary = BinaryOp::kAdd;  // Binary
  int64_t embedding_dim = 0;         // TimestepEmbedding
  bool flip_sin_to_cos = false;      // TimestepEmbedding
};

struct Op {
  std::string name;
  OpKind kind;
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  OpAttrs attrs;
  std::string weight;  // parameter keys; empty when the op has none
  std::string bias;
  // An fp32 island: diffusers computes this op in float32 inside a 16-bit model (a `.float()`
  // value: a DiT's modulation vectors, its timestep MLP) and hands the result on unrounded, so
  // the compiled path stores its output in f32 whatever the activation dtype.
  bool fp32_result = false;
};

// A conv's window as the [B,C,H,W] kernels read it: two spatial axes, one stride for both, no
// dilation, one group, zero padding. Every conv kernel takes such a conv on its fast path (the
// image kernels that fuse bias, residual and activation); any other conv runs on its N-d path.
struct Conv2dWindow {
  int stride = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};
std::optional<Conv2dWindow> conv2d_window(const Op& op);
std::optional<Conv2dWindow> conv2d_window(const OpAttrs& conv);  // of a kConv's attributes

// A slice along axis 1 (a VAE's mean and logvar): the image kernels slice channels in any layout.
bool slices_channels(const Op& op);

// A slice's end along an axis of `size` elements: an end <= 0 counts from the end (kToEnd: all
// of the axis after begin), as a graph must say for sizes it does not fix.
constexpr int kToEnd = 0;
inline int64_t slice_end(const OpAttrs& a, int64_t size) {
  return a.end > 0 ? a.end : size + a.end;
}

// A multi-head attention causal per frame of a video whose frames' size the graph does not fix:
// its 4th input is the [B,C,T,H,W] value the tokens came from, and a frame is H*W tokens.
constexpr int64_t kFrameTokensOfGrid = -1;
// Whether a multi-head attention's 4th input is a mask added to its scores.
bool attention_has_mask(const Op& op);
// A multi-head attention's attributes with frame_tokens in tokens, given its 4th input's shape
// (null when it has none).
OpAttrs resolved_attention(const Op& op, const Shape* fourth);

// A nearest upsample of a [B,C,H,W] value by 2 (the VAEs' Upsample2D), which the image kernels
// run in any layout and a conv can read through without materializing it.
bool upsamples_2x(const Op& op);

// Whether `op` runs on the N-dimensional kernels (row-major, one op at a time): the kinds from
// kConv on, except the image kernels' fast paths: a conv that conv2d_window() takes, a channel
// slice, upsamples_2x(), and an add (of one shape in any layout; a broadcasting add needs a
// row-major plan).
bool runs_nd(const Op& op);

// Conv and linear kinds: products over a weight matrix (stored in the policy's weight dtype).
bool is_matrix_op(OpKind kind);

// diffusers' one-head attention over an image's positions (the VAEs' mid-block Attention), as
// GraphBuilder::to_tokens/to_image build it: to_tokens (flatten [B,C,H,W] to [B,C,H*W], permute
// to [B,H*W,C]), to_q/to_k/to_v (linear_last on those tokens), one-head attention with no mask,
// to_out (linear_last), to_image (permute back, reshape to the image's shape). Channels-last,
// every token value is the image's own memory ([B,H,W,C] is [B,H*W,C]), so the image kernels
// run it without a row-major plan. Op indices, in execution order.
struct ImageAttention {
  int flatten = -1, tokens = -1, q = -1, k = -1, v = -1, attention = -1, out = -1,
      channels_first = -1, image = -1;
  std::vector<int> ops() const {
    return {flatten, tokens, q, k, v, attention, out, channels_first, image};
  }
};

// The op as a user names it: "conv2d" or "conv3d" for a conv, otherwise op_kind_name().
std::string op_label(const Op& op);

struct Graph;
// Every image attention of `g`, none of whose inner values is read outside it or is a graph
// output.
std::vector<ImageAttention> image_attentions(const Graph& g);

struct ParamSpec {
  std::string key;
  Shape shape;
};

struct Graph {
  std::string name;                                  // "vae.encoder"
  std::vector<std::string> value_names;              // by value id
  std::vector<std::pair<std::string, int>> inputs;   // pipeline input name -> value
  std::vector<std::pair<std::string, int>> outputs;  // pipeline output name -> value
  std::vector<Op> ops;                               // in execution order
  std::vector<ParamSpec> params;
  std::vector<std::pair<std::string, int>> modules;  // composite module path -> value
  int64_t input_pixel =
      1;  // image pixels per input element along H and W (a decoder's latents: the downscale)
  // A scheduler's arithmetic, which diffusers computes in float32 whatever the pipeline's dtype:
  // the compiled path runs its ops in fp32 and stores only its outputs in the activation dtype
  // (diffusers casts the step's result back to the model output's dtype).
  bool fp32_arithmetic = false;
  // diffusers' `_keep_in_fp32_modules`: a parameter whose dotted key has one of these as a
  // component stays fp32 under every weight dtype (from_pretrained's rule), and the layer
  // computes in fp32 (its input is cast to the parameter's dtype).
  std::vector<std::string> keep_in_fp32_modules;
  // The model's `_skip_layerwise_casting_patterns` (regular expressions searched in a layer's
  // module path), which layerwise casting adds to its default patterns.
  std::vector<std::string> skip_layerwise_casting_patterns;

  // Stable across runs and machines: a function of the ops, attributes and parameter shapes.
  uint64_t hash() const;
  // Whether any op runs_nd() outside an image attention: the whole graph then runs row-major
  // (and its image attentions on the N-dimensional kernels too).
  bool has_nd_ops() const;
  // The same, given the graph's image attentions (image_attentions(*this)) already found.
  bool has_nd_ops(const std::vector<ImageAttention>& attentions) const;
  // Index of the last op reading each value (for freeing buffers early); -1 if never read.
  std::vector<int> last_uses() const;
};

// The ops `ops` (indices, in order) of `g` as a graph of their own, with the same value ids:
// its inputs are the values they read from outside (named by value name), its outputs every
// op's output (named by op name). How one fused group is run again on the reference.
Graph subgraph(const Graph& g, const std::vector<int>& ops);

// Records ops while a model builder walks the architecture.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name);
  int input(const std::string& name);
  void output(const std::string& name, int value);
  void module(const std::string& path, int value);

  int conv2d(const std::string& name, int x, int cin, int cout, int kernel, int stride, int pad_top,
             int pad_bottom, int pad_left, int pad_right, bool bias);
  int conv2d_same(const std::string& name, int x, int cin, int cout, int kernel, bool bias = true);
  int group_norm(const std::string& name, int x, int channels, int groups, double eps);
  // N-dimensional ops. conv: `kernel`, `stride`, `dilation`, `pad_lo`, `pad_hi` per spatial
  // axis; weight [cout, cin/groups, *kernel].
  int conv(const std::string& name, int x, int cin, int cout, const std::vector<int>& kernel,
           const std::vector<int>& stride, const std::vector<int>& dilation,
           const std::vector<int>& pad_lo, const std::vector<int>& pad_hi, PadMode mode,
           int groups = 1, bool bias = true);
  int linear_last(const std::string& name, int x, int din, int dout, bool bias = true);
  // mask: a value id (-1: none) added to the scores.
  int multi_head_attention(const std::string& name, int q, int k, int v, int heads, double scale,
                           int mask = -1, int64_t frame_tokens = 0);
  // Self-attention over the tokens of `video` [B,C,T,H,W], each seeing its own and earlier
  // frames (HunyuanVideo's prepare_causal_attention_mask), at any frame size.
  int frame_causal_attention(const std::string& name, int q, int k, int v, int heads, double scale,
                             int video);
  // affine: weight and bias of shape `normalized` (the last norm_dims dims).
  int layer_norm(const std::string& name, int x, const Shape& normalized, double eps, bool affine);
  int rms_norm(const std::string& name, int x, int64_t dim, double eps, bool affine);
  int gelu(const std::string& name, int x, bool tanh_approximation);
  int concat(const std::string& name, const std::vector<int>& xs, int axis);
  int slice(const std::string& name, int x, int axis, int begin, int end);
  int reshape(const std::string& name, int x, const std::vector<int64_t>& dims);
  int reshape_like(const std::string& name, int x, int like);
  int timestep_embedding(const std::string& name, int timesteps, int64_t dim, bool flip_sin_to_cos,
                         double freq_shift);
  int interpolate_nearest(const std::string& name, int x, int like);
  // Nearest upsample of [B,C,*S] by a whole factor per spatial axis (a video VAE's (1,2,2) and
  // (2,2,2)); the output's size is the input's times the factor.
  int interpolate_nearest_by(const std::string& name, int x, const std::vector<int64_t>& factors);
  int upsample_nearest2x(const std::string& name, int x);  // interpolate_nearest by 2
  int permute(const std::string& name, int x, const std::vector<int64_t>& order);
  int binary(const std::string& name, BinaryOp op, int a, int b);
  // x + the parameter `key` of shape `shape`.
  int add_parameter(const std::string& name, int x, const std::string& key, const Shape& shape);
  // RoPE over the token grid of `grid` (its trailing 3 axes); `axis_dims` the frame, height
  // and width shares of the head dim.
  int rotary_embedding(const std::string& name, int x, int grid, int heads,
                       const std::vector<int64_t>& axis_dims, double theta);
  int unpatchify(const std::string& name, int x, int grid, const std::vector<int64_t>& patch);
  // [B,C,H,W] -> [B,H*W,C] tokens ("name.flatten", then the permute "name"), and tokens back to
  // the shape of `like` ("name.channels_first", then the reshape "name").
  int to_tokens(const std::string& name, int x, int64_t channels);
  int to_image(const std::string& name, int tokens, int like);
  int unary(const std::string& name, OpKind kind, int x, OpAttrs attrs = {});
  int add(const std::string& name, int a, int b);
  int slice_channels(const std::string& name, int x, int begin, int end);
  int clamp(const std::string& name, int x, double lo, double hi);
  // Marks the op that made `value` an fp32 island (Op::fp32_result).
  void fp32_result(int value);
  // The model class's lists (Graph::keep_in_fp32_modules, skip_layerwise_casting_patterns).
  void keep_in_fp32_modules(std::vector<std::string> components);
  void skip_layerwise_casting(std::vector<std::string> patterns);

  Graph finish();

 private:
  int emit(Op op);
  void param(const std::string& key, Shape shape);
  Graph g_;
};

}  // namespace tp
