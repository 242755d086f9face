#include "reference/executor.h"

#include <map>

#include "harness/core/shapes.h"
#include "reference/ops/ops.h"

namespace tp::ref {
namespace {

template <class T>
Tensor run_op(const Op& op, const std::vector<const Tensor*>& in, const Tensor* w,
              const Tensor* b) {
  switch (op.kind) {
    case OpKind::kGroupNorm:
      return group_norm<T>(*in[0], *w, *b, op.attrs.groups, op.attrs.eps);
    case OpKind::kConv:
      return conv<T>(*in[0], *w, b, op.attrs);
    case OpKind::kLinearLast:
      return linear_last<T>(*in[0], *w, b);
    case OpKind::kMultiHeadAttention: {
      const OpAttrs a = resolved_attention(op, in.size() > 3 ? &in[3]->shape() : nullptr);
      return multi_head_attention<T>(*in[0], *in[1], *in[2],
                                     attention_has_mask(op) ? in[3] : nullptr, a);
    }
    case OpKind::kLayerNorm:
      return layer_norm<T>(*in[0], w, b, op.attrs.norm_dims, op.attrs.eps);
    case OpKind::kRmsNorm:
      return rms_norm<T>(*in[0], w, op.attrs.eps);
    case OpKind::kGelu:
      return gelu<T>(*in[0], op.attrs.tanh_approximation);
    case OpKind::kConcat:
      return concat<T>(in, op.attrs.axis);
    case OpKind::kSlice: {
      const int axis = op.attrs.axis < 0 ? op.attrs.axis + in[0]->rank() : op.attrs.axis;
      return slice<T>(
          *in[0], op.attrs.axis, op.attrs.begin,
          slice_end(op.attrs, axis >= 0 && axis < in[0]->rank() ? in[0]->dim(axis) : 0));
    }
    case OpKind::kReshape: {
      if (in.size() == 2) return in[0]->reshaped(in[1]->shape());
      auto shape = reshape_target(in[0]->shape(), op.attrs.dims);
      TP_CHECK(shape.ok(), op.name + ": " + (shape.ok() ? "" : shape.error().message()));
      return in[0]->reshaped(*shape);
    }
    case OpKind::kPermute:
      return permute<T>(*in[0], op.attrs.dims);
    case OpKind::kBinary:
      return binary<T>(op.attrs.binary, *in[0], *in[1]);
    case OpKind::kTimestepEmbedding:
      return timestep_embedding<T>(*in[0], op.attrs);
    case OpKind::kInterpolateNearest:
      if (in.size() == 1 && !op.attrs.dims.empty()) {  // by a factor per axis
        Shape size = in[0]->shape();
        for (std::size_t i = 0; i < op.attrs.dims.size(); ++i) size[i + 2] *= op.attrs.dims[i];
        return interpolate_nearest<T>(*in[0], size);
      }
      if (in.size() == 1) return upsample_nearest2x<T>(*in[0]);  // upsamples_2x()
      return interpolate_nearest<T>(*in[0], in[1]->shape());
    case OpKind::kAddParameter:
      return binary<T>(BinaryOp::kAdd, *in[0], *w);
    case OpKind::kRotaryEmbedding:
      return rotary_embedding<T>(*in[0], in[1]->shape(), op.attrs);
    case OpKind::kUnpatchify:
      return unpatchify<T>(*in[0], in[1]->shape(), op.attrs);
    case OpKind::kSilu:
    case OpKind::kRelu:
    case OpKind::kTanhClamp:
    case OpKind::kAffine:
    case OpKind::kClamp:
      return elementwise<T>(op.kind, *in[0], op.attrs);
  }
  TP_CHECK(false, "unknown op kind");
  return {};
}

template <class T>
Expected<NamedTensors> run_typed(const Graph& graph, const Weights& weights,
                                 const NamedTensors& inputs, const ValueObserver& observe,
                                 const ValuePerturber& perturb) {
  std::vector<Tensor> values(graph.value_names.size());
  for (const auto& [name, id] : graph.inputs) {
    const Tensor* found = find_tensor(inputs, name);
    if (found == nullptr)
      return Error("graph " + graph.name + " needs an input named '" + name + "'");
    values[std::size_t(id)] = found->to(dtype_of<T>());
  }
  // Weights read in place when they are already T (an fp32 model on the fp32 reference: no second
  // copy of SDXL's 10 GB), else converted to T once per run.
  std::map<std::string, Tensor> params;
  auto param = [&](const std::string& key) -> const Tensor* {
    if (key.empty()) return nullptr;
    auto w = weights.find(key);
    TP_CHECK(w != weights.end(), "missing weight " + key);
    if (w->second.dtype() == dtype_of<T>()) return &w->second;
    auto it = params.find(key);
    if (it != params.end()) return &it->second;
    return &params.emplace(key, w->second.to(dtype_of<T>())).first->second;
  };
  const std::vector<int> last = graph.last_uses();
  std::vector<bool> keep(values.size(), false);
  for (const auto& [name, id] : graph.outputs) keep[std::size_t(id)] = true;
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    std::vector<const Tensor*> in;
    for (int v : op.inputs) in.push_back(&values[std::size_t(v)]);
    values[std::size_t(op.output)] = run_op<T>(op, in, param(op.weight), param(op.bias));
    if (perturb) perturb(op, values[std::size_t(op.output)]);
    if (observe) observe(op, values[std::size_t(op.output)]);
    for (int v : op.inputs)
      if (last[std::size_t(v)] == int(i) && !keep[std::size_t(v)])
        values[std::size_t(v)] = Tensor();
  }
  NamedTensors out;
  for (const auto& [name, id] : graph.outputs) out.emplace_back(name, values[std::size_t(id)]);
  return out;
}

}  // namespace

Status check_inputs_fit(const Graph& graph, const NamedTensors& inputs) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  auto all = infer_value_shapes(graph, shapes);
  if (!all.ok()) return all.error();
  return Status();
}

Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights,
                                 const NamedTensors& inputs, DType compute,
                                 const ValueObserver& observe, const ValuePerturber& perturb) {
  for (const auto& [name, t] : inputs)
    if (t.rank() < 1 || t.rank() > 5)
      return Error("input '" + name + "' has rank " + std::to_string(t.rank()) +
                   "; twinpath's graphs take tensors of rank 1 to 5");
  // Each op's operand shapes (a [B,C,H,W] kind on another rank, a kernel larger than its input)
  // are checked here, before anything runs.
  TP_RETURN_IF_ERROR(check_inputs_fit(graph, inputs));
  if (compute == DType::kF32) return run_typed<float>(graph, weights, inputs, observe, perturb);
  if (compute == DType::kF64) return run_typed<double>(graph, weights, inputs, observe, perturb);
  return Error(std::string("the reference path computes in f32 or f64, not ") +
               dtype_name(compute));
}

}  // namespace tp::ref
