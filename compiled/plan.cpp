#include "compiled/plan.h"

namespace tp::compiled {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kConv:
      return "conv";
    case GroupKind::kGroupNorm:
      return "group_norm";
    case GroupKind::kAttention:
      return "attention";
    case GroupKind::kElementwise:
      return "elementwise";
    case GroupKind::kUpsample:
      return "upsample";
  }
  return "?";
}

std::string Group::label() const {
  std::string s = upsample_prologue ? "upsample+" : "";
  return s + group_kind_name(kind) + "[" + std::to_string(ops.size()) + " ops]";
}

Expected<std::vector<Shape>> infer_shapes(const Graph& g, const Shape& input_shape) {
  if (input_shape.size() != 4)
    return Error("the compiled path takes [batch, channels, height, width] inputs, got " +
                 shape_string(input_shape));
  std::map<std::string, Shape> params;
  for (const ParamSpec& p : g.params) params[p.key] = p.shape;
  std::vector<Shape> s(g.value_names.size());
  for (const auto& [name, v] : g.inputs) s[std::size_t(v)] = input_shape;
  for (const Op& op : g.ops) {
    Shape x = s[std::size_t(op.inputs[0])];
    const OpAttrs& a = op.attrs;
    switch (op.kind) {
      case OpKind::kConv2d: {
        const Shape& w = params.at(op.weight);
        const int64_t h = x[2] + a.pad_top + a.pad_bottom - w[2],
                      wd = x[3] + a.pad_left + a.pad_right - w[3];
        if (h < 0 || wd < 0)
          return Error("the input " + shape_string(input_shape) + " is too small: at " + op.name +
                       " the activation is " + std::to_string(x[2]) + "x" + std::to_string(x[3]) +
                       ", smaller than its " + std::to_string(w[2]) + "x" + std::to_string(w[3]) +
                       " kernel; use a larger image or latent");
        x = {x[0], w[0], h / a.stride + 1, wd / a.stride + 1};
        break;
      }
      case OpKind::kLinear:
        x[1] = params.at(op.weight)[0];
        break;
      case OpKind::kUpsampleNearest2x:
        x[2] *= 2;
        x[3] *= 2;
        break;
      case OpKind::kSliceChannels:
        x[1] = a.end - a.begin;
        break;
      default:
        break;
    }
    s[std::size_t(op.output)] = x;
  }
  return s;
}

}  // namespace tp::compiled
