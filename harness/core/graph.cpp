#include "harness/core/graph.h"

#include <algorithm>
#include <cstring>

namespace tp {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kGroupNorm:
      return "group_norm";
    case OpKind::kSilu:
      return "silu";
    case OpKind::kRelu:
      return "relu";
    case OpKind::kTanhClamp:
      return "tanh_clamp";
    case OpKind::kAffine:
      return "affine";
    case OpKind::kClamp:
      return "clamp";
    case OpKind::kConv:
      return "conv";
    case OpKind::kLinearLast:
      return "linear_last";
    case OpKind::kMultiHeadAttention:
      return "multi_head_attention";
    case OpKind::kLayerNorm:
      return "layer_norm";
    case OpKind::kRmsNorm:
      return "rms_norm";
    case OpKind::kGelu:
      return "gelu";
    case OpKind::kConcat:
      return "concat";
    case OpKind::kSlice:
      return "slice";
    case OpKind::kReshape:
      return "reshape";
    case OpKind::kPermute:
      return "permute";
    case OpKind::kBinary:
      return "binary";
    case OpKind::kTimestepEmbedding:
      return "timestep_embedding";
    case OpKind::kInterpolateNearest:
      return "interpolate_nearest";
    case OpKind::kAddParameter:
      return "add_parameter";
    case OpKind::kRotaryEmbedding:
      return "rotary_embedding";
    case OpKind::kUnpatchify:
      return "unpatchify";
  }
  return "?";
}

namespace {
// FNV-1a, 64-bit: small, stable and good enough to key plans by graph structure.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void str(const std::string& s) {
    bytes(s.data(), s.size());
    bytes("\0", 1);
  }
  template <class T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
};
}  // namespace

uint64_t Graph::hash() const {
  Fnv f;
  f.str(name);
  for (const Op& op : ops) {
    f.str(op.name);
    f.pod(uint8_t(op.kind));
    for (int i : op.inputs) f.pod(int32_t(i));
    f.pod(int32_t(op.output));
    const OpAttrs& a = op.attrs;
    for (int v : {a.groups, a.begin, a.end}) f.pod(int32_t(v));
    for (double v : {a.eps, a.scale, a.shift, a.lo, a.hi}) f.pod(v);
    if (op.kind >= OpKind::kConv) {  // the N-d attributes
      for (const std::vector<int>* list : {&a.strides, &a.dilations, &a.pads_lo, &a.pads_hi}) {
        f.pod(uint32_t(list->size()));
        for (int v : *list) f.pod(int32_t(v));
      }
      f.pod(uint32_t(a.dims.size()));
      for (int64_t d : a.dims) f.pod(d);
      for (int v : {int(a.pad_mode), a.conv_groups, a.axis, a.heads, a.norm_dims,
                    int(a.tanh_approximation), int(a.binary)})
        f.pod(int32_t(v));
      f.pod(a.frame_tokens);
      f.pod(a.embedding_dim);
      f.pod(uint8_t(a.flip_sin_to_cos));
    }
    f.str(op.weight);
    f.str(op.bias);
    if (op.fp32_result) f.pod(uint8_t(2));  // left out when off: earlier hashes unchanged
  }
  for (const ParamSpec& p : params) {
    f.str(p.key);
    for (int64_t d : p.shape) f.pod(d);
  }
  if (fp32_arithmetic) f.pod(uint8_t(1));  // left out when off: earlier hashes unchanged
  for (const auto* list : {&keep_in_fp32_modules, &skip_layerwise_casting_patterns})
    for (const std::string& s : *list) f.str(s);
  return f.h;
}

std::optional<Conv2dWindow> conv2d_window(const Op& op) {
  if (op.kind != OpKind::kConv) return std::nullopt;
  return conv2d_window(op.attrs);
}

std::optional<Conv2dWindow> conv2d_window(const OpAttrs& a) {
  if (a.strides.size() != 2 || a.strides[0] != a.strides[1] ||
      a.dilations != std::vector<int>{1, 1} || a.conv_groups != 1 ||
      a.pad_mode != PadMode::kZeros || a.pads_lo.size() != 2 || a.pads_hi.size() != 2)
    return std::nullopt;
  return Conv2dWindow{a.strides[0], a.pads_lo[0], a.pads_hi[0], a.pads_lo[1], a.pads_hi[1]};
}

bool slices_channels(const Op& op) { return op.kind == OpKind::kSlice && op.attrs.axis == 1; }

bool attention_has_mask(const Op& op) {
  return op.kind == OpKind::kMultiHeadAttention && op.inputs.size() > 3 &&
         op.attrs.frame_tokens != kFrameTokensOfGrid;
}

OpAttrs resolved_attention(const Op& op, const Shape* fourth) {
  OpAttrs a = op.attrs;
  if (a.frame_tokens == kFrameTokensOfGrid)
    a.frame_tokens = fourth && fourth->size() >= 2 ? fourth->end()[-1] * fourth->end()[-2] : 0;
  return a;
}

bool upsamples_2x(const Op& op) {
  return op.kind == OpKind::kInterpolateNearest && op.inputs.size() == 1 && op.attrs.scale == 2;
}

bool runs_nd(const Op& op) {
  const bool add = op.kind == OpKind::kBinary && op.attrs.binary == BinaryOp::kAdd;
  return op.kind >= OpKind::kConv && !conv2d_window(op) && !add && !slices_channels(op) &&
         !upsamples_2x(op);
}

bool is_matrix_op(OpKind k) { return k == OpKind::kConv || k == OpKind::kLinearLast; }

std::string op_label(const Op& op) {
  if (op.kind == OpKind::kConv) return "conv" + std::to_string(op.attrs.strides.size()) + "d";
  if (op.kind == OpKind::kBinary) {
    static const char* const names[] = {"add", "sub", "mul", "div"};
    return names[int(op.attrs.binary)];
  }
  return op_kind_name(op.kind);
}

namespace {

// The one op reading `value` (and no graph output holds it), else -1.
int only_reader(const Graph& g, const std::vector<std::vector<int>>& readers, int value) {
  for (const auto& [name, v] : g.outputs)
    if (v == value) return -1;
  const std::vector<int>& r = readers[std::size_t(value)];
  return r.size() == 1 ? r[0] : -1;
}

bool swaps_last_two(const Op& op) {
  return op.kind == OpKind::kPermute && op.attrs.dims == std::vector<int64_t>{0, 2, 1};
}

// The image attention starting at op `flatten` (see ImageAttention), if it is one.
std::optional<ImageAttention> image_attention_at(const Graph& g,
                                                 const std::vector<std::vector<int>>& readers,
                                                 const std::vector<int>& producer, int flatten) {
  const Op& f = g.ops[std::size_t(flatten)];
  if (f.kind != OpKind::kReshape || f.inputs.size() != 1 || f.attrs.dims.size() != 3 ||
      f.attrs.dims[0] != 0 || f.attrs.dims[2] != -1)
    return std::nullopt;
  ImageAttention a;
  a.flatten = flatten;
  a.tokens = only_reader(g, readers, f.output);
  if (a.tokens < 0 || !swaps_last_two(g.ops[std::size_t(a.tokens)])) return std::nullopt;
  const Op& t = g.ops[std::size_t(a.tokens)];
  const std::vector<int>& projections = readers[std::size_t(t.output)];
  if (projections.size() != 3) return std::nullopt;
  for (int p : projections) {
    const Op& proj = g.ops[std::size_t(p)];
    if (proj.kind != OpKind::kLinearLast || only_reader(g, readers, proj.output) < 0)
      return std::nullopt;
  }
  a.attention = only_reader(g, readers, g.ops[std::size_t(projections[0])].output);
  if (a.attention < 0) return std::nullopt;
  const Op& m = g.ops[std::size_t(a.attention)];
  if (m.kind != OpKind::kMultiHeadAttention || m.inputs.size() != 3 || m.attrs.heads != 1 ||
      m.attrs.frame_tokens != 0)
    return std::nullopt;
  a.q = producer[std::size_t(m.inputs[0])];
  a.k = producer[std::size_t(m.inputs[1])];
  a.v = producer[std::size_t(m.inputs[2])];
  for (int p : {a.q, a.k, a.v})
    if (std::find(projections.begin(), projections.end(), p) == projections.end())
      return std::nullopt;
  if (a.q == a.k || a.k == a.v || a.q == a.v) return std::nullopt;
  a.out = only_reader(g, readers, m.output);
  if (a.out < 0 || g.ops[std::size_t(a.out)].kind != OpKind::kLinearLast) return std::nullopt;
  a.channels_first = only_reader(g, readers, g.ops[std::size_t(a.out)].output);
  if (a.channels_first < 0 || !swaps_last_two(g.ops[std::size_t(a.channels_first)]))
    return std::nullopt;
  a.image = only_reader(g, readers, g.ops[std::size_t(a.channels_first)].output);
  if (a.image < 0) return std::nullopt;
  const Op& back = g.ops[std::size_t(a.image)];
  if (back.kind != OpKind::kReshape || back.inputs.size() != 2) return std::nullopt;
  return a;
}

}  // namespace

std::vector<ImageAttention> image_attentions(const Graph& g) {
  std::vector<std::vector<int>> readers(g.value_names.size());
  std::vector<int> producer(g.value_names.size(), -1);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    for (int v : g.ops[i].inputs) readers[std::size_t(v)].push_back(int(i));
    producer[std::size_t(g.ops[i].output)] = int(i);
  }
  std::vector<ImageAttention> found;
  for (std::size_t i = 0; i < g.ops.size(); ++i)
    if (auto a = image_attention_at(g, readers, producer, int(i))) found.push_back(*a);
  return found;
}

bool Graph::has_nd_ops() const { return has_nd_ops(image_attentions(*this)); }

bool Graph::has_nd_ops(const std::vector<ImageAttention>& attentions) const {
  std::vector<bool> inside(ops.size(), false);
  for (const ImageAttention& a : attentions)
    for (int o : a.ops()) inside[std::size_t(o)] = true;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (runs_nd(ops[i]) && !inside[i]) return true;
  return false;
}

std::vector<int> Graph::last_uses() const {
  std::vector<int> last(value_names.size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (int v : ops[i].inputs) last[std::size_t(v)] = int(i);
  return last;
}

GraphBuilder::GraphBuilder(std::string graph_name) { g_.name = std::move(graph_name); }

int GraphBuilder::input(const std::string& name) {
  g_.value_names.push_back(name);
  const int id = int(g_.value_names.size()) - 1;
  g_.inputs.emplace_back(name, id);
  return id;
}

void GraphBuilder::output(const std::string& name, int value) {
  g_.outputs.emplace_back(name, value);
}
void GraphBuilder::module(const std::string& path, int value) {
  g_.modules.emplace_back(path, value);
}

void GraphBuilder::param(const std::string& key, Shape shape) {
  g_.params.push_back({key, std::move(shape)});
}

int GraphBuilder::emit(Op op) {
  g_.value_names.push_back(op.name);
  op.output = int(g_.value_names.size()) - 1;
  g_.ops.push_back(std::move(op));
  return g_.ops.back().output;
}

int GraphBuilder::conv2d(const std::string& name, int x, int cin, int cout, int kernel, int stride,
                         int pad_top, int pad_bottom, int pad_left, int pad_right, bool bias) {
  return conv(name, x, cin, cout, {kernel, kernel}, {stride, stride}, {1, 1}, {pad_top, pad_left},
              {pad_bottom, pad_right}, PadMode::kZeros, 1, bias);
}

int GraphBuilder::conv2d_same(const std::string& name, int x, int cin, int cout, int kernel,
                              bool bias) {
  const int pad = kernel / 2;
  return conv2d(name, x, cin, cout, kernel, 1, pad, pad, pad, pad, bias);
}

int GraphBuilder::group_norm(const std::string& name, int x, int channels, int groups, double eps) {
  Op op{name, OpKind::kGroupNorm, {x}, -1, {}, name + ".weight", name + ".bias"};
  op.attrs.groups = groups;
  op.attrs.eps = eps;
  param(op.weight, {channels});
  param(op.bias, {channels});
  return emit(std::move(op));
}

int GraphBuilder::conv(const std::string& name, int x, int cin, int cout,
                       const std::vector<int>& kernel, const std::vector<int>& stride,
                       const std::vector<int>& dilation, const std::vector<int>& pad_lo,
                       const std::vector<int>& pad_hi, PadMode mode, int groups, bool bias) {
  TP_CHECK(!kernel.empty() && kernel.size() <= 3 && stride.size() == kernel.size() &&
               dilation.size() == kernel.size() && pad_lo.size() == kernel.size() &&
               pad_hi.size() == kernel.size() && groups > 0 && cin % groups == 0 &&
               cout % groups == 0,
           name + ": conv takes 1 to 3 spatial axes, one stride, dilation and padding per axis");
  Op op{name, OpKind::kConv, {x}, -1, {}, name + ".weight", bias ? name + ".bias" : ""};
  op.attrs.strides = stride;
  op.attrs.dilations = dilation;
  op.attrs.pads_lo = pad_lo;
  op.attrs.pads_hi = pad_hi;
  op.attrs.pad_mode = mode;
  op.attrs.conv_groups = groups;
  Shape w{cout, cin / groups};
  for (int k : kernel) w.push_back(k);
  param(op.weight, w);
  if (bias) param(op.bias, {cout});
  return emit(std::move(op));
}

int GraphBuilder::linear_last(const std::string& name, int x, int din, int dout, bool bias) {
  Op op{name, OpKind::kLinearLast, {x}, -1, {}, name + ".weight", bias ? name + ".bias" : ""};
  param(op.weight, {dout, din});
  if (bias) param(op.bias, {dout});
  return emit(std::move(op));
}

int GraphBuilder::multi_head_attention(const std::string& name, int q, int k, int v, int heads,
                                       double scale, int mask, int64_t frame_tokens) {
  Op op{name, OpKind::kMultiHeadAttention, {q, k, v}, -1, {}, "", ""};
  if (mask >= 0) op.inputs.push_back(mask);
  op.attrs.heads = heads;
  op.attrs.scale = scale;
  op.attrs.frame_tokens = frame_tokens;
  return emit(std::move(op));
}

int GraphBuilder::frame_causal_attention(const std::string& name, int q, int k, int v, int heads,
                                         double scale, int video) {
  Op op{name, OpKind::kMultiHeadAttention, {q, k, v, video}, -1, {}, "", ""};
  op.attrs.heads = heads;
  op.attrs.scale = scale;
  op.attrs.frame_tokens = kFrameTokensOfGrid;
  return emit(std::move(op));
}

int GraphBuilder::layer_norm(const std::string& name, int x, const Shape& normalized, double eps,
                             bool affine) {
  Op op{name, OpKind::kLayerNorm, {x}, -1, {}, "", ""};
  op.attrs.norm_dims = int(normalized.size());
  op.attrs.eps = eps;
  if (affine) {
    op.weight = name + ".weight";
    op.bias = name + ".bias";
    param(op.weight, normalized);
    param(op.bias, normalized);
  }
  return emit(std::move(op));
}

int GraphBuilder::rms_norm(const std::string& name, int x, int64_t dim, double eps, bool affine) {
  Op op{name, OpKind::kRmsNorm, {x}, -1, {}, affine ? name + ".weight" : "", ""};
  op.attrs.eps = eps;
  if (affine) param(op.weight, {dim});
  return emit(std::move(op));
}

int GraphBuilder::gelu(const std::string& name, int x, bool tanh_approximation) {
  Op op{name, OpKind::kGelu, {x}, -1, {}, "", ""};
  op.attrs.tanh_approximation = tanh_approximation;
  return emit(std::move(op));
}

int GraphBuilder::concat(const std::string& name, const std::vector<int>& xs, int axis) {
  Op op{name, OpKind::kConcat, xs, -1, {}, "", ""};
  op.attrs.axis = axis;
  return emit(std::move(op));
}

int GraphBuilder::slice(const std::string& name, int x, int axis, int begin, int end) {
  Op op{name, OpKind::kSlice, {x}, -1, {}, "", ""};
  op.attrs.axis = axis;
  op.attrs.begin = begin;
  op.attrs.end = end;
  return emit(std::move(op));
}

int GraphBuilder::reshape(const std::string& name, int x, const std::vector<int64_t>& dims) {
  Op op{name, OpKind::kReshape, {x}, -1, {}, "", ""};
  op.attrs.dims = dims;
  return emit(std::move(op));
}

int GraphBuilder::reshape_like(const std::string& name, int x, int like) {
  return emit(Op{name, OpKind::kReshape, {x, like}, -1, {}, "", ""});
}

int GraphBuilder::timestep_embedding(const std::string& name, int timesteps, int64_t dim,
                                     bool flip_sin_to_cos, double freq_shift) {
  Op op{name, OpKind::kTimestepEmbedding, {timesteps}, -1, {}, "", ""};
  op.attrs.embedding_dim = dim;
  op.attrs.flip_sin_to_cos = flip_sin_to_cos;
  op.attrs.shift = freq_shift;
  return emit(std::move(op));
}

int GraphBuilder::interpolate_nearest(const std::string& name, int x, int like) {
  return emit(Op{name, OpKind::kInterpolateNearest, {x, like}, -1, {}, "", ""});
}

int GraphBuilder::interpolate_nearest_by(const std::string& name, int x,
                                         const std::vector<int64_t>& factors) {
  Op op{name, OpKind::kInterpolateNearest, {x}, -1, {}, "", ""};
  op.attrs.dims = factors;
  return emit(std::move(op));
}

int GraphBuilder::upsample_nearest2x(const std::string& name, int x) {
  Op op{name, OpKind::kInterpolateNearest, {x}, -1, {}, "", ""};
  op.attrs.scale = 2;
  return emit(std::move(op));
}

int GraphBuilder::permute(const std::string& name, int x, const std::vector<int64_t>& order) {
  Op op{name, OpKind::kPermute, {x}, -1, {}, "", ""};
  op.attrs.dims = order;
  return emit(std::move(op));
}

int GraphBuilder::binary(const std::string& name, BinaryOp bop, int a, int b) {
  Op op{name, OpKind::kBinary, {a, b}, -1, {}, "", ""};
  op.attrs.binary = bop;
  return emit(std::move(op));
}

int GraphBuilder::add_parameter(const std::string& name, int x, const std::string& key,
                                const Shape& shape) {
  param(key, shape);
  return emit(Op{name, OpKind::kAddParameter, {x}, -1, {}, key, ""});
}

int GraphBuilder::rotary_embedding(const std::string& name, int x, int grid, int heads,
                                   const std::vector<int64_t>& axis_dims, double theta) {
  Op op{name, OpKind::kRotaryEmbedding, {x, grid}, -1, {}, "", ""};
  op.attrs.heads = heads;
  op.attrs.dims = axis_dims;
  op.attrs.scale = theta;
  return emit(std::move(op));
}

int GraphBuilder::unpatchify(const std::string& name, int x, int grid,
                             const std::vector<int64_t>& patch) {
  Op op{name, OpKind::kUnpatchify, {x, grid}, -1, {}, "", ""};
  op.attrs.dims = patch;
  return emit(std::move(op));
}

int GraphBuilder::to_tokens(const std::string& name, int x, int64_t channels) {
  return permute(name, reshape(name + ".flatten", x, {0, channels, -1}), {0, 2, 1});
}

int GraphBuilder::to_image(const std::string& name, int tokens, int like) {
  return reshape_like(name, permute(name + ".channels_first", tokens, {0, 2, 1}), like);
}

int GraphBuilder::unary(const std::string& name, OpKind kind, int x, OpAttrs attrs) {
  return emit(Op{name, kind, {x}, -1, attrs, "", ""});
}

int GraphBuilder::add(const std::string& name, int a, int b) {
  return binary(name, BinaryOp::kAdd, a, b);
}

int GraphBuilder::slice_channels(const std::string& name, int x, int begin, int end) {
  return slice(name, x, 1, begin, end);
}

int GraphBuilder::clamp(const std::string& name, int x, double lo, double hi) {
  OpAttrs a;
  a.lo = lo;
  a.hi = hi;
  return emit(Op{name, OpKind::kClamp, {x}, -1, a, "", ""});
}

void GraphBuilder::fp32_result(int value) {
  for (Op& op : g_.ops)
    if (op.output == value) op.fp32_result = true;
}

void GraphBuilder::keep_in_fp32_modules(std::vector<std::string> components) {
  g_.keep_in_fp32_modules = std::move(components);
}

void GraphBuilder::skip_layerwise_casting(std::vector<std::string> patterns) {
  g_.skip_layerwise_casting_patterns = std::move(patterns);
}

Graph GraphBuilder::finish() { return std::move(g_); }

Graph subgraph(const Graph& g, const std::vector<int>& ops) {
  Graph sub;
  sub.name = g.name + "[group]";
  sub.value_names = g.value_names;
  sub.keep_in_fp32_modules = g.keep_in_fp32_modules;
  sub.skip_layerwise_casting_patterns = g.skip_layerwise_casting_patterns;
  std::vector<bool> produced(g.value_names.size(), false), read(g.value_names.size(), false);
  for (int o : ops) {
    const Op& op = g.ops[std::size_t(o)];
    for (int v : op.inputs)
      if (!produced[std::size_t(v)] && !read[std::size_t(v)]) {
        read[std::size_t(v)] = true;
        sub.inputs.emplace_back(g.value_names[std::size_t(v)], v);
      }
    produced[std::size_t(op.output)] = true;
    sub.ops.push_back(op);
    sub.outputs.emplace_back(op.name, op.output);
  }
  for (const ParamSpec& p : g.params)
    for (const Op& op : sub.ops)
      if (p.key == op.weight || p.key == op.bias) {
        sub.params.push_back(p);
        break;
      }
  return sub;
}

}  // namespace tp
