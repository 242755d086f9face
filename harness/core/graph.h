// The graph IR: a model's computation as an ordered list of named ops. Op names are diffusers
// module paths (`decoder.up_blocks.2.resnets.1.conv2`); functional steps that have no module
// of their own are named under their parent (`...resnets.1.act1`, `...resnets.1.add`).
// Composite modules (`...resnets.1`, `decoder.mid_block`) are recorded as aliases of the value
// they output, so every diffusers module output is a checkpoint both paths can materialize.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/tensor.h"

namespace tp {

enum class OpKind : uint8_t {
  kConv2d,     // in[0]: x [B,Cin,H,W]; weight [Cout,Cin,k,k]; bias [Cout]?
  kGroupNorm,  // affine, biased variance; weight/bias [C]
  kSilu,       // x * sigmoid(x)
  kRelu,
  kTanhClamp,          // tanh(x / scale) * scale  (AutoencoderTiny's latent clamp)
  kUpsampleNearest2x,  // out[y][x] = in[y/2][x/2]
  kLinear,             // over the channel dim of [B,C,H,W], tokens = H*W; weight [Cout,Cin]
  kAttention,          // in: q, k, v [B,C,H,W]; softmax(q^T k * scale) v, one head of dim C
  kAdd,                // in[0] + in[1]
  kAffine,             // x * scale + shift
  kSliceChannels,      // channels [begin, end)
  kClamp,              // min(max(x, lo), hi)
};

const char* op_kind_name(OpKind kind);

struct OpAttrs {
  int stride = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // conv zero padding
  int groups = 0;                                                // GroupNorm
  double eps = 0;                                                // GroupNorm
  double scale = 1, shift = 0;                                   // Affine, TanhClamp, Attention
  double lo = 0, hi = 0;                                         // Clamp
  int begin = 0, end = 0;                                        // SliceChannels
};

struct Op {
  std::string name;
  OpKind kind;
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  OpAttrs attrs;
  std::string weight;  // parameter keys; empty when the op has none
  std::string bias;
};

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

  // Stable across runs and machines: a function of the ops, attributes and parameter shapes.
  uint64_t hash() const;
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
  int linear(const std::string& name, int x, int cin, int cout);
  int attention(const std::string& name, int q, int k, int v, double scale);
  int unary(const std::string& name, OpKind kind, int x, OpAttrs attrs = {});
  int add(const std::string& name, int a, int b);
  int slice_channels(const std::string& name, int x, int begin, int end);
  int clamp(const std::string& name, int x, double lo, double hi);

  Graph finish();

 private:
  int emit(Op op);
  void param(const std::string& key, Shape shape);
  Graph g_;
};

}  // namespace tp
