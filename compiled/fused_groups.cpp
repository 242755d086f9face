#include "compiled/fused_groups.h"

namespace tp::compiled {
namespace {

// Faults the fused kernels do not reproduce: a plan that injects one keeps the per-op kernels.
bool has_fused_op_fault(const FaultSet& f) {
  for (Fault k : {Fault::kGroupNormF16Accum, Fault::kGroupNormOnePass, Fault::kGroupNormVectorTail,
                  Fault::kUpsampleOffByOne, Fault::kF16StoreTruncate, Fault::kBf16StoreTruncate,
                  Fault::kSiluInActivationDtype})
    if (f.has(k)) return true;
  return false;
}

// The group stores exactly one value, the last op's output.
bool single_output_of_last_op(const Plan& plan, const Group& group) {
  return !group.ops.empty() && group.outputs.size() == 1 &&
         group.outputs[0] == plan.graph->ops[std::size_t(group.ops.back())].output;
}

bool eligible(const Plan& plan, const Group& group) {
  return !plan.row_major && !has_fused_op_fault(plan.faults) &&
         single_output_of_last_op(plan, group);
}

}  // namespace

std::optional<ConvEpilogue> match_conv_epilogue(const Plan& plan, const Group& group) {
  if (group.kind != GroupKind::kConv || !eligible(plan, group)) return std::nullopt;
  if (group.policy.accumulation != DType::kF32) return std::nullopt;
  const auto& ops = plan.graph->ops;
  ConvEpilogue m;
  std::size_t i = 0;
  if (group.upsample_prologue) {
    if (!upsamples_2x(ops[std::size_t(group.ops[0])])) return std::nullopt;
    m.upsample = group.ops[i++];
  }
  if (i >= group.ops.size() || !conv2d_window(ops[std::size_t(group.ops[i])])) return std::nullopt;
  m.conv = group.ops[i++];
  const Op& conv = ops[std::size_t(m.conv)];
  m.input = m.upsample >= 0 ? ops[std::size_t(m.upsample)].inputs[0] : conv.inputs[0];
  if (m.upsample >= 0 && conv.inputs[0] != ops[std::size_t(m.upsample)].output) return std::nullopt;
  if (i < group.ops.size()) {
    const Op& add = ops[std::size_t(group.ops[i])];
    if (add.kind != OpKind::kBinary || add.attrs.binary != BinaryOp::kAdd) return std::nullopt;
    const bool first = add.inputs[0] == conv.output, second = add.inputs[1] == conv.output;
    if (first == second) return std::nullopt;  // not fed by the conv, or the conv twice
    m.add = group.ops[i++];
    m.residual = first ? add.inputs[1] : add.inputs[0];
  }
  if (i != group.ops.size()) return std::nullopt;
  return m;
}

ConvProblem conv_problem(const Plan& plan, const ConvEpilogue& m, const Shape& input,
                         const Shape& output, DType operand) {
  const Op& op = plan.graph->ops[std::size_t(m.conv)];
  const Shape& w = plan.params.at(op.weight)->shape;  // [k, c, r, s]
  const int64_t up = m.upsample >= 0 ? 2 : 1;
  ConvProblem p;
  p.operand = operand;
  p.n = input[0];
  p.c = input[1];
  p.h = up * input[2];
  p.w = up * input[3];
  p.k = output[1];
  p.ho = output[2];
  p.wo = output[3];
  p.r = w.size() == 4 ? w[2] : 1;
  p.s = w.size() == 4 ? w[3] : 1;
  const Conv2dWindow window = *conv2d_window(op);
  p.stride = window.stride;
  p.pad_top = window.pad_top;
  p.pad_left = window.pad_left;
  p.pad_bottom = window.pad_bottom;
  p.pad_right = window.pad_right;
  return p;
}

std::string ConvProblem::describe() const {
  auto list = [](std::initializer_list<int64_t> v) {
    std::string s = "[";
    for (int64_t x : v) s += (s.size() > 1 ? "," : "") + std::to_string(x);
    return s + "]";
  };
  return std::string(dtype_name(operand)) + " x " + list({n, h, w, c}) + " w " +
         list({k, r, s, c}) + " stride " + std::to_string(stride) + " pad " +
         list({pad_top, pad_left, pad_bottom, pad_right});
}

std::optional<NormActivation> match_norm_activation(const Plan& plan, const Group& group) {
  if (group.kind != GroupKind::kGroupNorm || !eligible(plan, group)) return std::nullopt;
  const auto& ops = plan.graph->ops;
  if (ops[std::size_t(group.ops[0])].kind != OpKind::kGroupNorm) return std::nullopt;
  NormActivation m;
  m.norm = group.ops[0];
  if (group.ops.size() == 1) return m;
  const Op& silu = ops[std::size_t(group.ops[1])];
  if (group.ops.size() != 2 || silu.kind != OpKind::kSilu ||
      silu.inputs[0] != ops[std::size_t(m.norm)].output)
    return std::nullopt;
  m.silu = group.ops[1];
  return m;
}

}  // namespace tp::compiled
