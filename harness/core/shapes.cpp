#include "harness/core/shapes.h"

#include <algorithm>

namespace tp {
namespace {

std::string at(const Op& op) { return op.name + " (" + op_label(op) + "): "; }

int normalized_axis(int axis, std::size_t rank) { return axis < 0 ? axis + int(rank) : axis; }

// "64x64" for the dims of `s` from `first` on.
std::string sizes_string(const Shape& s, std::size_t first) {
  std::string out;
  for (std::size_t i = first; i < s.size(); ++i)
    out += (i == first ? "" : "x") + std::to_string(s[i]);
  return out;
}

// Tokens in the grid of a value's trailing 3 axes (a patch embedding [B,D,F,H,W]).
int64_t grid_tokens(const Shape& grid) {
  return grid[grid.size() - 3] * grid[grid.size() - 2] * grid[grid.size() - 1];
}

// Output shape of one op from its input shapes and parameter shapes; `graph_input` names the
// graph's input in messages about sizes it is too small for.
Expected<Shape> op_shape(const Op& op, const std::vector<const Shape*>& in,
                         const std::map<std::string, Shape>& params,
                         const std::string& graph_input) {
  const OpAttrs& a = op.attrs;
  const Shape& x = *in[0];
  auto param = [&](const std::string& key) -> const Shape& { return params.at(key); };
  auto bad = [&](const std::string& why) { return Error(at(op) + why); };
  switch (op.kind) {
    case OpKind::kGroupNorm:
      if (x.size() < 2 || a.groups <= 0 || x[1] % a.groups)
        return bad(std::to_string(a.groups) + " groups do not divide the channels of " +
                   shape_string(x));
      return x;
    case OpKind::kConv: {
      const Shape& w = param(op.weight);
      const std::size_t spatial = w.size() - 2;
      if (x.size() != w.size() || a.conv_groups <= 0 || x[1] != w[1] * a.conv_groups ||
          w[0] % a.conv_groups || a.strides.size() != spatial || a.dilations.size() != spatial ||
          a.pads_lo.size() != spatial || a.pads_hi.size() != spatial)
        return bad("input " + shape_string(x) + " does not fit weight " + shape_string(w) + " in " +
                   std::to_string(a.conv_groups) + " groups");
      Shape out{x[0], w[0]};
      for (std::size_t i = 0; i < spatial; ++i) {
        const int64_t span =
            x[2 + i] + a.pads_lo[i] + a.pads_hi[i] - int64_t(a.dilations[i]) * (w[2 + i] - 1) - 1;
        if (a.strides[i] <= 0) return bad("stride " + std::to_string(a.strides[i]));
        if (span < 0)
          return Error(graph_input + " is too small: at " + op.name + " the activation is " +
                       sizes_string(x, 2) + ", smaller than its " + sizes_string(w, 2) +
                       " kernel; use a larger image or latent");
        out.push_back(span / a.strides[i] + 1);
      }
      return out;
    }
    case OpKind::kLinearLast: {
      const Shape& w = param(op.weight);
      if (x.empty() || x.back() != w[1])
        return bad("input " + shape_string(x) + " does not fit weight " + shape_string(w));
      Shape out = x;
      out.back() = w[0];
      return out;
    }
    case OpKind::kMultiHeadAttention: {
      const Shape &q = x, &k = *in[1], &v = *in[2];
      if (q.size() != 3 || k.size() != 3 || v.size() != 3 || k[0] != q[0] || v[0] != q[0] ||
          k[1] != v[1] || q[2] != k[2] || a.heads <= 0 || q[2] % a.heads || v[2] % a.heads)
        return bad("q " + shape_string(q) + ", k " + shape_string(k) + ", v " + shape_string(v) +
                   " do not fit " + std::to_string(a.heads) + " heads");
      if (a.frame_tokens == kFrameTokensOfGrid) {
        if (in.size() != 4) return bad("is causal per frame of a video it is not given");
        const Shape& video = *in[3];
        if (video.size() != 5 || video[0] != q[0] || video[2] * video[3] * video[4] != q[1] ||
            q[1] != k[1])
          return bad("causal frames of " + shape_string(video) + " for " + std::to_string(q[1]) +
                     " self-attention tokens");
        return Shape{q[0], q[1], v[2]};
      }
      if (in.size() > 3) {
        const Shape& m = *in[3];
        const bool fits = (m.size() == 2 && m[0] == q[1] && m[1] == k[1]) ||
                          (m.size() == 3 && m[0] == q[0] && m[1] == q[1] && m[2] == k[1]);
        if (!fits)
          return bad("mask " + shape_string(m) + " is not [Lq, Lk] or [B, Lq, Lk] for " +
                     std::to_string(q[1]) + " queries and " + std::to_string(k[1]) + " keys");
      }
      if (a.frame_tokens < 0 || (a.frame_tokens > 0 && (q[1] % a.frame_tokens || q[1] != k[1])))
        return bad("causal frames of " + std::to_string(a.frame_tokens) + " tokens do not divide " +
                   std::to_string(q[1]) + " self-attention tokens");
      return Shape{q[0], q[1], v[2]};
    }
    case OpKind::kLayerNorm:
      if (a.norm_dims < 1 || std::size_t(a.norm_dims) > x.size())
        return bad("normalizes the last " + std::to_string(a.norm_dims) + " dims of " +
                   shape_string(x));
      return x;
    case OpKind::kRmsNorm:
    case OpKind::kGelu:
    case OpKind::kSilu:
    case OpKind::kRelu:
    case OpKind::kTanhClamp:
    case OpKind::kAffine:
    case OpKind::kClamp:
      if (x.empty()) return bad("takes a tensor of rank 1 or more");
      return x;
    case OpKind::kConcat: {
      const int axis = normalized_axis(a.axis, x.size());
      if (axis < 0 || axis >= int(x.size())) return bad("axis " + std::to_string(a.axis));
      Shape out = x;
      out[std::size_t(axis)] = 0;
      for (const Shape* s : in) {
        Shape other = *s;
        if (other.size() != x.size()) return bad("ranks differ: " + shape_string(other));
        out[std::size_t(axis)] += other[std::size_t(axis)];
        other[std::size_t(axis)] = x[std::size_t(axis)];
        if (other != x)
          return bad(shape_string(*s) + " and " + shape_string(x) + " differ off axis " +
                     std::to_string(a.axis));
      }
      return out;
    }
    case OpKind::kSlice: {
      const int axis = normalized_axis(a.axis, x.size());
      const int64_t end =
          axis < 0 || axis >= int(x.size()) ? 0 : slice_end(a, x[std::size_t(axis)]);
      if (axis < 0 || axis >= int(x.size()) || a.begin < 0 || a.begin >= end ||
          end > x[std::size_t(axis)])
        return bad("[" + std::to_string(a.begin) + ", " + std::to_string(end) + ") along axis " +
                   std::to_string(a.axis) + " of " + shape_string(x));
      Shape out = x;
      out[std::size_t(axis)] = end - a.begin;
      return out;
    }
    case OpKind::kReshape: {
      if (in.size() == 2) {
        if (shape_numel(*in[1]) != shape_numel(x))
          return bad(shape_string(x) + " has another element count than " + shape_string(*in[1]));
        return *in[1];
      }
      auto out = reshape_target(x, a.dims);
      if (!out.ok()) return bad(out.error().message());
      return out;
    }
    case OpKind::kPermute: {
      if (a.dims.size() != x.size()) return bad("order of rank " + std::to_string(a.dims.size()));
      std::vector<bool> seen(x.size(), false);
      Shape out;
      for (int64_t d : a.dims) {
        if (d < 0 || d >= int64_t(x.size()) || seen[std::size_t(d)])
          return bad("order is not a permutation of " + std::to_string(x.size()) + " dims");
        seen[std::size_t(d)] = true;
        out.push_back(x[std::size_t(d)]);
      }
      return out;
    }
    case OpKind::kBinary: {
      auto out = broadcast_shape(x, *in[1]);
      if (!out.ok()) return bad(out.error().message());
      return out;
    }
    case OpKind::kTimestepEmbedding: {
      if (a.embedding_dim < 2) return bad("embedding dim " + std::to_string(a.embedding_dim));
      Shape out = x;
      out.push_back(a.embedding_dim);
      return out;
    }
    case OpKind::kInterpolateNearest: {
      if (in.size() == 1 && !a.dims.empty()) {  // by a whole factor per spatial axis
        if (x.size() != a.dims.size() + 2)
          return bad("upsamples " + std::to_string(a.dims.size()) + " spatial axes, not " +
                     shape_string(x));
        Shape out = x;
        for (std::size_t i = 0; i < a.dims.size(); ++i) {
          if (a.dims[i] < 1) return bad("upsamples by whole factors of at least 1");
          out[i + 2] *= a.dims[i];
        }
        return out;
      }
      if (in.size() == 1) {  // by a whole factor: the image kernels' 2x
        if (x.size() != 4 || a.scale != 2)
          return bad("upsamples [B,C,H,W] by 2, not " + shape_string(x));
        return Shape{x[0], x[1], 2 * x[2], 2 * x[3]};
      }
      const Shape& like = *in[1];
      const std::size_t spatial = x.size() < 3 ? 0 : x.size() - 2;
      if (spatial == 0 || spatial > 3 || like.size() < spatial)
        return bad("resizes the spatial axes of [B,C,*S], not " + shape_string(x) + " to " +
                   shape_string(like));
      Shape out{x[0], x[1]};
      for (std::size_t i = 0; i < spatial; ++i) out.push_back(like[like.size() - spatial + i]);
      return out;
    }
    case OpKind::kAddParameter: {
      auto out = broadcast_shape(x, param(op.weight));
      if (!out.ok()) return bad(out.error().message());
      return out;
    }
    case OpKind::kRotaryEmbedding: {
      const Shape& grid = *in[1];
      int64_t share = 0;
      bool even = true;
      for (int64_t d : a.dims) {
        share += d;
        even = even && d > 0 && d % 2 == 0;
      }
      if (x.size() != 3 || grid.size() < 3 || a.dims.size() != 3 || !even || a.heads <= 0 ||
          x[2] % a.heads || share != x[2] / a.heads)
        return bad("rotates [B,S,heads*Dh] by axis shares that are even and sum to Dh, not " +
                   shape_string(x) + " in " + std::to_string(a.heads) + " heads");
      if (grid_tokens(grid) != x[1])
        return bad(std::to_string(x[1]) + " tokens are not the grid " +
                   sizes_string(grid, grid.size() - 3));
      return x;
    }
    case OpKind::kUnpatchify: {
      const Shape& grid = *in[1];
      int64_t patch = 1;
      for (int64_t d : a.dims) patch *= d;
      if (x.size() != 3 || grid.size() < 3 || a.dims.size() != 3 || patch <= 0 || x[2] % patch ||
          grid_tokens(grid) != x[1])
        return bad("unpatchifies [B,S,P*C] on the grid of " + shape_string(grid) + " by a patch " +
                   "of 3 sizes, not " + shape_string(x));
      const std::size_t g = grid.size() - 3;
      return Shape{x[0], x[2] / patch, grid[g] * a.dims[0], grid[g + 1] * a.dims[1],
                   grid[g + 2] * a.dims[2]};
    }
  }
  return bad("unknown op kind");
}

}  // namespace

std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t step = 1;
  for (std::size_t i = 0; i < operand.size(); ++i) {
    const std::size_t axis = operand.size() - 1 - i, o = out.size() - 1 - i;
    strides[o] = operand[axis] == 1 ? 0 : step;
    step *= operand[axis];
  }
  return strides;
}

Expected<Shape> broadcast_shape(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return Error("shapes " + shape_string(a) + " and " + shape_string(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Expected<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& dims) {
  Shape out;
  int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == 0) {
      if (i >= in.size())
        return Error("reshape: dim 0 at " + std::to_string(i) + " has no input dim");
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) return Error("reshape: more than one -1");
      infer = int64_t(i);
      out.push_back(1);
      continue;
    }
    known *= d;
    out.push_back(d);
  }
  const int64_t n = shape_numel(in);
  if (infer >= 0) {
    if (known == 0 || n % known) return Error("reshape " + shape_string(in) + ": cannot infer -1");
    out[std::size_t(infer)] = n / known;
  }
  if (shape_numel(out) != n)
    return Error("reshape " + shape_string(in) + " to " + shape_string(out) + ": sizes differ");
  return out;
}

Expected<std::vector<Shape>> infer_value_shapes(const Graph& g,
                                                const std::map<std::string, Shape>& inputs) {
  std::map<std::string, Shape> params;
  for (const ParamSpec& p : g.params) params[p.key] = p.shape;
  std::vector<Shape> s(g.value_names.size());
  std::vector<bool> known(g.value_names.size(), false);
  std::string graph_input = "the input";
  if (auto first = g.inputs.empty() ? inputs.end() : inputs.find(g.inputs[0].first);
      first != inputs.end())
    graph_input += " " + shape_string(first->second);
  for (const auto& [name, v] : g.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) continue;  // an input no op reads may be left out
    s[std::size_t(v)] = it->second;
    known[std::size_t(v)] = true;
  }
  for (const Op& op : g.ops) {
    std::vector<const Shape*> in;
    for (int v : op.inputs) {
      if (!known[std::size_t(v)])
        return Error(at(op) + "its input '" + g.value_names[std::size_t(v)] +
                     "' is not given; the graph takes " + std::to_string(g.inputs.size()) +
                     " inputs");
      in.push_back(&s[std::size_t(v)]);
    }
    for (const std::string* key : {&op.weight, &op.bias})
      if (!key->empty() && !params.count(*key))
        return Error(at(op) + "no parameter " + *key + " in the graph");
    TP_ASSIGN_OR_RETURN(s[std::size_t(op.output)], op_shape(op, in, params, graph_input));
    known[std::size_t(op.output)] = true;
  }
  return s;
}

int64_t longest_sum(const Op& op, const Shape* weight,
                    const std::function<const Shape*(int)>& shape_of) {
  if (weight && weight->size() > 1)
    return shape_numel(*weight) / std::max<int64_t>(1, (*weight)[0]);
  const Shape* in = op.inputs.empty() ? nullptr : shape_of(op.inputs[0]);
  switch (op.kind) {
    case OpKind::kMultiHeadAttention: {  // q.k over the head dim, p.v over the keys
      const Shape* keys = op.inputs.size() > 1 ? shape_of(op.inputs[1]) : nullptr;
      return in && keys && keys->size() > 1
                 ? std::max(in->back() / std::max(op.attrs.heads, 1), keys->at(1))
                 : 1;
    }
    case OpKind::kGroupNorm:
      return in && in->size() > 1 ? shape_numel(*in) / in->at(0) / std::max(op.attrs.groups, 1) : 1;
    case OpKind::kLayerNorm: {
      int64_t n = 1;
      for (int i = 0; in && i < op.attrs.norm_dims && i < int(in->size()); ++i)
        n *= in->at(in->size() - 1 - std::size_t(i));
      return n;
    }
    case OpKind::kRmsNorm:
      return in && !in->empty() ? in->back() : 1;
    default:
      return 1;
  }
}

}  // namespace tp
