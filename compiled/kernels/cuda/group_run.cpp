// GroupRun: the group loop on the device (each op into an fp32 device buffer, each group output
// rounded once into the arena, the stream synchronized after the group so an error names it) and
// the [B,C,H,W] kinds: conv2d as patches + cuBLAS, GroupNorm, pointwise ops, adds and channel
// slices, and an image attention's projections and one head on its tokens (channels-last, the
// image's memory); in a row-major plan they run on channels-last copies.
#include "compiled/kernels/cuda/cuda_backend.h"

namespace tp::compiled::cuda_impl {

Status GroupRun::run(const Group& grp) {
  locals_.clear();
  views_of_.clear();
  if (be_.cudnn()) {
    TP_ASSIGN_OR_RETURN(bool fused, run_fused(grp));
    if (fused) return finish(grp);
  }
  const LayerPolicy& pol = grp.policy;
  const FaultSet& f = plan_.faults;
  for (int o : grp.ops) {
    const Op& op = g_.ops[std::size_t(o)];
    const std::string what = op.name + " (" + op_label(op) + ")";
    DeviceMemory out;
    if (!plan_.row_major && (op.kind == OpKind::kReshape || op.kind == OpKind::kPermute)) {
      views_of_[op.output] = op.inputs[0];  // an image attention's token views
      continue;
    }
    if (plan_.row_major && runs_nd(op)) {
      TP_ASSIGN_OR_RETURN(out, nd_op(op, f, pol, what));
      locals_[op.output] = std::move(out);
      continue;
    }
    // In a row-major plan the [B,C,H,W] kinds whose kernels index channels run on
    // channels-last copies (pointwise ops and adds do not care), as in the emulation.
    const bool relayout = plan_.row_major && channels_matter(op.kind);
    if (relayout)
      for (int v : op.inputs) TP_RETURN_IF_ERROR(to_channels_last(v, what));
    const Dims od = dims_of(op.output);
    switch (op.kind) {
      case OpKind::kInterpolateNearest: {     // upsamples_2x() (runs_nd() is false)
        if (grp.upsample_prologue) continue;  // the conv reads through it
        TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
        TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
        TP_CUDA(cuda::upsample_nearest2x(x.src, x.dims, out.get<float>(), be_.stream()), what);
        break;
      }
      case OpKind::kConv: {  // conv2d_window() takes it (runs_nd() is false)
        const bool up = grp.upsample_prologue;
        const int src = up ? g_.ops[std::size_t(grp.ops[0])].inputs[0] : op.inputs[0];
        const cuda::Upsample mode = !up ? cuda::Upsample::kNone
                                    : f.has(Fault::kUpsampleOffByOne)
                                        ? cuda::Upsample::kNearest2xOffByOne
                                        : cuda::Upsample::kNearest2x;
        TP_ASSIGN_OR_RETURN(out, conv(op, src, *conv2d_window(op), mode, od, pol.accumulation));
        break;
      }
      case OpKind::kLinearLast: {  // an image attention's projection: a 1x1 conv
        TP_ASSIGN_OR_RETURN(out, conv(op, op.inputs[0], Conv2dWindow{}, cuda::Upsample::kNone, od,
                                      pol.accumulation));
        break;
      }
      case OpKind::kGroupNorm: {
        TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
        TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
        TP_ASSIGN_OR_RETURN(const DeviceParam* gamma,
                            be_.param(plan_.params.at(op.weight), Storage::kF32));
        TP_ASSIGN_OR_RETURN(const DeviceParam* beta,
                            be_.param(plan_.params.at(op.bias), Storage::kF32));
        TP_ASSIGN_OR_RETURN(
            DeviceMemory ws,
            be_.scratch(int64_t(cuda::group_norm_workspace_bytes(od.b, op.attrs.groups)), what));
        TP_CUDA(cuda::group_norm(
                    x.src, x.dims, op.attrs.groups, op.attrs.eps, gamma->values[0].get<float>(),
                    beta->values[0].get<float>(),
                    f.has(Fault::kGroupNormF16Accum) || f.has(Fault::kGroupNormOnePass),
                    f.has(Fault::kGroupNormF16Accum) ? Storage::kF16 : Storage::kF32,
                    f.has(Fault::kGroupNormVectorTail), ws.get(), out.get<float>(), be_.stream()),
                what);
        break;
      }
      case OpKind::kMultiHeadAttention: {  // an image attention's one head
        TP_ASSIGN_OR_RETURN(out, attention(op, od, f.has(Fault::kSoftmaxNoMax), pol.activation,
                                           pol.attention_operands()));
        break;
      }
      case OpKind::kBinary: {   // an add (runs_nd() is false)
        if (plan_.row_major) {  // the N-d kernel, which broadcasts
          TP_ASSIGN_OR_RETURN(out, nd_op(op, f, pol, what));
          break;
        }
        TP_ASSIGN_OR_RETURN(Value a, value(op.inputs[0]));
        TP_ASSIGN_OR_RETURN(Value b, value(op.inputs[1]));
        if (a.dims.numel() != b.dims.numel())
          return Error(what + ": adds values of different sizes");
        TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
        TP_CUDA(cuda::add(a.src, b.src, od.numel(), out.get<float>(), be_.stream()), what);
        break;
      }
      case OpKind::kSlice: {  // slices_channels() (runs_nd() is false)
        TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
        TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
        TP_CUDA(cuda::slice_channels(x.src, x.dims.b * x.dims.h * x.dims.w, x.dims.c,
                                     op.attrs.begin, op.attrs.end, out.get<float>(), be_.stream()),
                what);
        break;
      }
      default: {
        TP_ASSIGN_OR_RETURN(cuda::PointwiseArgs args, pointwise_args(op));
        if (op.kind == OpKind::kSilu && f.has(Fault::kSiluInActivationDtype)) {
          TP_ASSIGN_OR_RETURN(args.rounded, storage_of(pol.activation));
        }
        TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
        TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
        TP_CUDA(cuda::pointwise(x.src, od.numel(), args, out.get<float>(), be_.stream()), what);
        break;
      }
    }
    if (relayout) {
      channels_last_.clear();
      TP_ASSIGN_OR_RETURN(out, to_row_major(out, op.output, what));
    }
    locals_[op.output] = std::move(out);
  }
  for (std::size_t i = 0; i < grp.outputs.size(); ++i) {
    const int v = grp.outputs[i];
    const Buffer& b = plan_.buffers.at(v);
    TP_ASSIGN_OR_RETURN(Storage s, storage_of(b.dtype));
    const bool truncate = (b.dtype == DType::kF16 && f.has(Fault::kF16StoreTruncate)) ||
                          (b.dtype == DType::kBF16 && f.has(Fault::kBf16StoreTruncate));
    TP_CUDA((truncate ? cuda::store_truncated : cuda::store_rounded)(
                locals_.at(viewed(v)).get<float>(), shape_numel(shape(v)), s, arena_ + b.offset,
                be_.stream()),
            "storing " + grp.checkpoints[i]);
  }
  return finish(grp);
}

Status GroupRun::finish(const Group& grp) {
  // Launch errors are checked here; a fault inside a kernel surfaces at the next synchronizing
  // call unless TWINPATH_CUDA_SYNC=1 waits for every group, so the error names its group.
  const std::string where = "group " + grp.label() + " (" + grp.checkpoints[0] + ")";
  TP_CUDA(cudaGetLastError(), where);
  if (sync_each_group()) TP_CUDA(cudaStreamSynchronize(be_.stream()), where);
  locals_.clear();
  widened_.clear();
  views_of_.clear();
  return Status();
}

Expected<GroupRun::Value> GroupRun::value(int v) {
  const Dims d = dims_of(v);
  v = viewed(v);
  auto relaid = channels_last_.find(v);
  if (relaid != channels_last_.end()) return Value{Src{relaid->second.get(), Storage::kF32}, d};
  auto local = locals_.find(v);
  if (local != locals_.end()) return Value{Src{local->second.get(), Storage::kF32}, d};
  auto view = bound_.views.find(v);
  if (view != bound_.views.end()) {
    TP_ASSIGN_OR_RETURN(Storage s, storage_of(view->second.dtype));
    return Value{Src{view->second.data, s}, d};
  }
  const Buffer& b = plan_.buffers.at(v);
  TP_ASSIGN_OR_RETURN(Storage s, storage_of(b.dtype));
  return Value{Src{arena_ + b.offset, s}, d};
}

Expected<const float*> GroupRun::as_f32(int v) {
  TP_ASSIGN_OR_RETURN(Value x, value(v));
  if (x.src.storage == Storage::kF32) return static_cast<const float*>(x.src.data);
  TP_ASSIGN_OR_RETURN(DeviceMemory m, be_.scratch(x.dims.numel() * 4, "widening a value"));
  TP_CUDA(cuda::widen(x.src, x.dims.numel(), m.get<float>(), be_.stream()), "widening a value");
  const float* p = m.get<float>();
  widened_.push_back(std::move(m));
  return p;
}

Expected<cuda::PointwiseArgs> GroupRun::pointwise_args(const Op& op) {
  cuda::PointwiseArgs a;
  switch (op.kind) {
    case OpKind::kSilu:
      a.op = cuda::Pointwise::kSilu;
      break;
    case OpKind::kRelu:
      a.op = cuda::Pointwise::kRelu;
      break;
    case OpKind::kTanhClamp:
      a.op = cuda::Pointwise::kTanhClamp;
      break;
    case OpKind::kAffine:
      a.op = cuda::Pointwise::kAffine;
      break;
    case OpKind::kClamp:
      a.op = cuda::Pointwise::kClamp;
      break;
    default:
      return Error(op.name + ": the CUDA backend has no kernel for op " + op_kind_name(op.kind));
  }
  a.scale = float(op.attrs.scale);
  a.shift = float(op.attrs.shift);
  a.lo = float(op.attrs.lo);
  a.hi = float(op.attrs.hi);
  return a;
}

Expected<DeviceMemory> GroupRun::conv(const Op& op, int src, const Conv2dWindow& a,
                                      cuda::Upsample up, const Dims& od, DType accumulation) {
  const std::string what = op.name + " (" + op_label(op) + ")";
  TP_ASSIGN_OR_RETURN(Value x, value(src));
  const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
  const Storage operand = operand_for(x.src.storage, w->storage);
  TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, operand));
  const DeviceParam* db = nullptr;
  if (!op.bias.empty()) {
    TP_ASSIGN_OR_RETURN(db, be_.param(plan_.params.at(op.bias), Storage::kF32));
  }
  cuda::ConvGeometry g;
  g.kh = w->shape.size() == 4 ? int(w->shape[2]) : 1;
  g.kw = w->shape.size() == 4 ? int(w->shape[3]) : 1;
  g.stride = a.stride;
  g.pad_top = a.pad_top;
  g.pad_left = a.pad_left;
  g.hin = up == cuda::Upsample::kNone ? x.dims.h : 2 * x.dims.h;
  g.win = up == cuda::Upsample::kNone ? x.dims.w : 2 * x.dims.w;
  g.ho = od.h;
  g.wo = od.w;
  const int64_t co = od.c, k = int64_t(g.kh) * g.kw * x.dims.c;
  TP_RETURN_IF_ERROR(check_weight_count(*w, co * k));
  const bool f16_acc = accumulation == DType::kF16 && operand == Storage::kF16;
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(od.numel() * 4, what));
  const void* wp = dw->values[std::size_t(operand)].get();
  const bool direct = g.kh == 1 && g.kw == 1 && a.stride == 1 && up == cuda::Upsample::kNone &&
                      a.pad_top == 0 && a.pad_left == 0 && a.pad_bottom == 0 && a.pad_right == 0 &&
                      operand == x.src.storage;
  if (direct) {
    TP_RETURN_IF_ERROR(be_.gemm(x.src.data, wp, operand, od.b * od.h * od.w, co, k, true, f16_acc,
                                out.get<float>()));
  } else {
    const int64_t row_bytes = g.wo * k * int64_t(storage_size(operand));
    const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(g.ho, kWorkspaceBytes / row_bytes));
    TP_ASSIGN_OR_RETURN(DeviceMemory patches, be_.scratch(rows * row_bytes, what + " patches"));
    for (int64_t n = 0; n < od.b; ++n)
      for (int64_t y0 = 0; y0 < g.ho; y0 += rows) {
        const int64_t r = std::min(rows, g.ho - y0);
        TP_CUDA(cuda::im2col(x.src, x.dims, n, y0, r, g, up, operand, patches.get(), be_.stream()),
                what + " patches");
        TP_RETURN_IF_ERROR(be_.gemm(patches.get(), wp, operand, r * g.wo, co, k, true, f16_acc,
                                    out.get<float>() + (n * g.ho + y0) * g.wo * co));
      }
  }
  TP_CUDA(cuda::scale_bias(out.get<float>(), od.b * od.h * od.w, co, dw->scales.get<float>(),
                           db ? db->values[0].get<float>() : nullptr, be_.stream()),
          what + " scale and bias");
  return out;
}

Expected<DeviceMemory> GroupRun::attention(const Op& op, const Dims& od, bool no_max,
                                           DType activation, DType operands) {
  const std::string what = op.name + " (attention)";
  const Dims qd = dims_of(op.inputs[0]), vd = dims_of(op.inputs[2]);
  TP_ASSIGN_OR_RETURN(const float* q, as_f32(op.inputs[0]));
  TP_ASSIGN_OR_RETURN(const float* k, as_f32(op.inputs[1]));
  TP_ASSIGN_OR_RETURN(const float* v, as_f32(op.inputs[2]));
  TP_ASSIGN_OR_RETURN(Storage act, storage_of(activation));
  TP_ASSIGN_OR_RETURN(Storage operand, storage_of(operands));
  const int64_t n = qd.h * qd.w, c = qd.c, cv = vd.c;
  const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(n, kWorkspaceBytes / (n * 4)));
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(od.numel() * 4, what));
  TP_ASSIGN_OR_RETURN(DeviceMemory scores, be_.scratch(rows * n * 4, what + " scores"));
  // attn=act: q, k, v and P rounded to the activation dtype, so both products run on tensor
  // cores (cuBLAS, fp32 accumulation); the scores and the softmax stay fp32.
  const void *qs = q, *ks = k, *vs = v, *ps = scores.get();
  DeviceMemory q16, k16, v16, p16;
  if (operand != Storage::kF32) {
    const std::pair<const float*, DeviceMemory*> copies[] = {{q, &q16}, {k, &k16}, {v, &v16}};
    const int64_t sizes[] = {qd.numel(), qd.numel(), vd.numel()};
    for (int i = 0; i < 3; ++i) {
      TP_ASSIGN_OR_RETURN(*copies[i].second, be_.scratch(sizes[i] * 2, what + " operands"));
      TP_CUDA(cuda::store_rounded(copies[i].first, sizes[i], operand, copies[i].second->get(),
                                  be_.stream()),
              what + " operands");
    }
    TP_ASSIGN_OR_RETURN(p16, be_.scratch(rows * n * 2, what + " weights"));
    qs = q16.get();
    ks = k16.get();
    vs = v16.get();
    ps = p16.get();
  }
  const int64_t elem = int64_t(storage_size(operand));
  auto at = [elem](const void* base, int64_t offset) {
    return static_cast<const std::byte*>(base) + offset * elem;
  };
  for (int64_t b = 0; b < qd.b; ++b)
    for (int64_t q0 = 0; q0 < n; q0 += rows) {
      const int64_t r = std::min(rows, n - q0);
      TP_RETURN_IF_ERROR(be_.gemm(at(qs, (b * n + q0) * c), at(ks, b * n * c), operand, r, n, c,
                                  true, false, scores.get<float>()));
      TP_CUDA(cuda::softmax_rows(scores.get<float>(), r, n, float(op.attrs.scale), no_max, act,
                                 be_.stream()),
              what + " softmax");
      if (operand != Storage::kF32)
        TP_CUDA(cuda::store_rounded(scores.get<float>(), r * n, operand, p16.get(), be_.stream()),
                what + " weights");
      TP_RETURN_IF_ERROR(be_.gemm(ps, at(vs, b * n * cv), operand, r, cv, n, false, false,
                                  out.get<float>() + (b * n + q0) * cv));
    }
  return out;
}

bool GroupRun::channels_matter(OpKind k) {
  return k == OpKind::kConv || k == OpKind::kGroupNorm || k == OpKind::kInterpolateNearest ||
         k == OpKind::kSlice;
}

Status GroupRun::to_channels_last(int v, const std::string& what) {
  if (channels_last_.count(v)) return Status();
  TP_ASSIGN_OR_RETURN(Value x, value(v));
  const Shape& s = shape(v);
  const int64_t plane = shape_numel(s) / (s[0] * s[1]);
  TP_ASSIGN_OR_RETURN(DeviceMemory m, be_.scratch(shape_numel(s) * 4, what + " channels last"));
  TP_CUDA(cuda::transpose_channels(x.src, s[0], s[1], plane, true, m.get<float>(), be_.stream()),
          what + " channels last");
  channels_last_[v] = std::move(m);
  return Status();
}

Expected<DeviceMemory> GroupRun::to_row_major(const DeviceMemory& last, int v,
                                              const std::string& what) {
  const Shape& s = shape(v);
  const int64_t plane = shape_numel(s) / (s[0] * s[1]);
  TP_ASSIGN_OR_RETURN(DeviceMemory m, be_.scratch(shape_numel(s) * 4, what + " row-major"));
  TP_CUDA(cuda::transpose_channels(Src{last.get(), Storage::kF32}, s[0], s[1], plane, false,
                                   m.get<float>(), be_.stream()),
          what + " row-major");
  return m;
}

}  // namespace tp::compiled::cuda_impl
