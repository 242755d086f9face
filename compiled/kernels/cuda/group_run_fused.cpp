// The fused kernel set's groups (compiled/fused_groups.h): a conv group as one cuDNN
// implicit-GEMM conv into an fp32 accumulator and one epilogue pass that stores the group's
// output, and a GroupNorm [+ SiLU] group as its statistics and one pass that stores. Anything
// else, or a conv cuDNN has no allowed engine for, runs on the per-op kernels (group_run.cpp).
#include "compiled/kernels/cuda/cuda_backend.h"

namespace tp::compiled::cuda_impl {
namespace {

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % std::uintptr_t(kCudnnAlignment) == 0;
}

}  // namespace

Expected<bool> GroupRun::run_fused(const Group& grp) {
  if (auto m = match_conv_epilogue(plan_, grp)) return fused_conv(grp, *m);
  if (auto m = match_norm_activation(plan_, grp)) return fused_norm(grp, *m);
  return false;
}

Expected<bool> GroupRun::fused_conv(const Group& grp, const ConvEpilogue& m) {
  const Op& op = g_.ops[std::size_t(m.conv)];
  const std::string what = op.name + " (conv2d, fused)";
  TP_ASSIGN_OR_RETURN(Value x, value(m.input));
  const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
  const Storage operand = operand_for(x.src.storage, w->storage);
  if (operand == Storage::kF32 || operand != x.src.storage || w->shape.size() != 4) return false;
  const Dims od = nhwc_dims(shape(op.output));
  const bool up = m.upsample >= 0;
  if (shape(m.input).size() != 4 || shape(op.output).size() != 4) return false;
  const ConvProblem p = conv_problem(plan_, m, shape(m.input), shape(op.output), dtype_of(operand));
  TP_RETURN_IF_ERROR(check_weight_count(*w, p.k * p.r * p.s * p.c));
  const CudnnConvs::Planned* planned = be_.cudnn()->plan(p);
  if (!planned || !aligned(x.src.data)) return false;

  Src residual{};
  if (m.residual >= 0) {
    TP_ASSIGN_OR_RETURN(Value r, value(m.residual));
    if (r.dims.numel() != od.numel()) return Error(what + ": adds values of different sizes");
    residual = r.src;
  }
  const Buffer& out = plan_.buffers.at(grp.outputs[0]);
  TP_ASSIGN_OR_RETURN(Storage storage, storage_of(out.dtype));
  TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, operand));
  const DeviceParam* db = nullptr;
  if (!op.bias.empty()) {
    TP_ASSIGN_OR_RETURN(db, be_.param(plan_.params.at(op.bias), Storage::kF32));
  }

  // The upsample prologue as a tensor of its own, in the operand dtype (exact: a copy): cuDNN
  // has no gather prologue. A 1x1 "patch" gather with the upsample in its indexing writes it.
  const void* input = x.src.data;
  DeviceMemory upsampled;
  if (up) {
    const int64_t image = p.h * p.w * p.c * int64_t(storage_size(operand));
    TP_ASSIGN_OR_RETURN(upsampled, be_.scratch(p.n * image, what + " upsample"));
    cuda::ConvGeometry g;
    g.hin = g.ho = p.h;
    g.win = g.wo = p.w;
    for (int64_t n = 0; n < p.n; ++n)
      TP_CUDA(cuda::im2col(x.src, x.dims, n, 0, p.h, g, cuda::Upsample::kNearest2x, operand,
                           upsampled.get<std::byte>() + n * image, be_.stream()),
              what + " upsample");
    input = upsampled.get();
  }
  TP_ASSIGN_OR_RETURN(DeviceMemory acc, be_.scratch(od.numel() * 4, what));
  TP_ASSIGN_OR_RETURN(DeviceMemory workspace, be_.scratch(CudnnConvs::workspace_bytes(*planned),
                                                          what + " cuDNN workspace"));
  TP_RETURN_IF_ERROR(be_.cudnn()->run(*planned, input, dw->values[std::size_t(operand)].get(),
                                      acc.get<float>(), workspace.get()));
  TP_CUDA(cuda::conv_epilogue(acc.get<float>(), od.b * od.h * od.w, od.c, dw->scales.get<float>(),
                              db ? db->values[0].get<float>() : nullptr, residual, storage,
                              arena_ + out.offset, be_.stream()),
          what + " epilogue");
  return true;
}

Expected<bool> GroupRun::fused_norm(const Group& grp, const NormActivation& m) {
  const Op& op = g_.ops[std::size_t(m.norm)];
  const std::string what = op.name + " (group_norm, fused)";
  TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
  TP_ASSIGN_OR_RETURN(const DeviceParam* gamma,
                      be_.param(plan_.params.at(op.weight), Storage::kF32));
  TP_ASSIGN_OR_RETURN(const DeviceParam* beta, be_.param(plan_.params.at(op.bias), Storage::kF32));
  TP_ASSIGN_OR_RETURN(
      DeviceMemory ws,
      be_.scratch(int64_t(cuda::group_norm_workspace_bytes(x.dims.b, op.attrs.groups)), what));
  const Buffer& out = plan_.buffers.at(grp.outputs[0]);
  TP_ASSIGN_OR_RETURN(Storage storage, storage_of(out.dtype));
  TP_CUDA(cuda::group_norm_store(x.src, x.dims, op.attrs.groups, op.attrs.eps,
                                 gamma->values[0].get<float>(), beta->values[0].get<float>(),
                                 m.silu >= 0, ws.get(), storage, arena_ + out.offset, be_.stream()),
          what);
  return true;
}

}  // namespace tp::compiled::cuda_impl
