#include "harness/core/graph.h"

#include <cstring>

namespace tp {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kConv2d:
      return "conv2d";
    case OpKind::kGroupNorm:
      return "group_norm";
    case OpKind::kSilu:
      return "silu";
    case OpKind::kRelu:
      return "relu";
    case OpKind::kTanhClamp:
      return "tanh_clamp";
    case OpKind::kUpsampleNearest2x:
      return "upsample_nearest2x";
    case OpKind::kLinear:
      return "linear";
    case OpKind::kAttention:
      return "attention";
    case OpKind::kAdd:
      return "add";
    case OpKind::kAffine:
      return "affine";
    case OpKind::kSliceChannels:
      return "slice_channels";
    case OpKind::kClamp:
      return "clamp";
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
    for (int v :
         {a.stride, a.pad_top, a.pad_bottom, a.pad_left, a.pad_right, a.groups, a.begin, a.end})
      f.pod(int32_t(v));
    for (double v : {a.eps, a.scale, a.shift, a.lo, a.hi}) f.pod(v);
    f.str(op.weight);
    f.str(op.bias);
  }
  for (const ParamSpec& p : params) {
    f.str(p.key);
    for (int64_t d : p.shape) f.pod(d);
  }
  return f.h;
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
  Op op{name, OpKind::kConv2d, {x}, -1, {}, name + ".weight", bias ? name + ".bias" : ""};
  op.attrs.stride = stride;
  op.attrs.pad_top = pad_top;
  op.attrs.pad_bottom = pad_bottom;
  op.attrs.pad_left = pad_left;
  op.attrs.pad_right = pad_right;
  param(op.weight, {cout, cin, kernel, kernel});
  if (bias) param(op.bias, {cout});
  return emit(std::move(op));
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

int GraphBuilder::linear(const std::string& name, int x, int cin, int cout) {
  Op op{name, OpKind::kLinear, {x}, -1, {}, name + ".weight", name + ".bias"};
  param(op.weight, {cout, cin});
  param(op.bias, {cout});
  return emit(std::move(op));
}

int GraphBuilder::attention(const std::string& name, int q, int k, int v, double scale) {
  Op op{name, OpKind::kAttention, {q, k, v}, -1, {}, "", ""};
  op.attrs.scale = scale;
  return emit(std::move(op));
}

int GraphBuilder::unary(const std::string& name, OpKind kind, int x, OpAttrs attrs) {
  return emit(Op{name, kind, {x}, -1, attrs, "", ""});
}

int GraphBuilder::add(const std::string& name, int a, int b) {
  return emit(Op{name, OpKind::kAdd, {a, b}, -1, {}, "", ""});
}

int GraphBuilder::slice_channels(const std::string& name, int x, int begin, int end) {
  OpAttrs a;
  a.begin = begin;
  a.end = end;
  return emit(Op{name, OpKind::kSliceChannels, {x}, -1, a, "", ""});
}

int GraphBuilder::clamp(const std::string& name, int x, double lo, double hi) {
  OpAttrs a;
  a.lo = lo;
  a.hi = hi;
  return emit(Op{name, OpKind::kClamp, {x}, -1, a, "", ""});
}

Graph GraphBuilder::finish() { return std::move(g_); }

Graph subgraph(const Graph& g, const std::vector<int>& ops) {
  Graph sub;
  sub.name = g.name + "[group]";
  sub.value_names = g.value_names;
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
