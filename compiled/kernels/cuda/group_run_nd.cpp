// GroupRun's N-dimensional ops (Plan::row_major: values in their logical shapes): N-d conv and
// linear_last through cuBLAS, multi-head attention, norms, GELU, reshape, permute, broadcast
// binaries, concat, slice, the timestep sinusoid, nearest resize, a parameter added, RoPE and
// unpatchify (kernels in nd_ops.cu).
#include <cmath>

#include "compiled/kernels/cuda/cuda_backend.h"
#include "harness/core/shapes.h"

namespace tp::compiled::cuda_impl {

Expected<cuda::Strides> GroupRun::strides(const Shape& out, const std::vector<int64_t>& source,
                                          const std::string& what) const {
  if (out.size() > std::size_t(cuda::kMaxRank))
    return Error(what + ": tensors of rank " + std::to_string(out.size()) +
                 " have no CUDA kernel (at most " + std::to_string(cuda::kMaxRank) +
                 "); run it on the CPU emulation (--device cpu)");
  cuda::Strides st;
  st.rank = int(out.size());
  for (std::size_t d = 0; d < out.size(); ++d) {
    st.dims[d] = out[d];
    st.strides[d] = source[d];
  }
  return st;
}

void GroupRun::split_at(const Shape& s, int axis, int64_t& outer, int64_t& along, int64_t& inner) {
  outer = along = inner = 1;
  for (int i = 0; i < int(s.size()); ++i)
    (i < axis ? outer : i == axis ? along : inner) *= s[std::size_t(i)];
}

Expected<const float*> GroupRun::optional_param(const std::string& key) {
  if (key.empty()) return static_cast<const float*>(nullptr);
  TP_ASSIGN_OR_RETURN(const DeviceParam* p, be_.param(plan_.params.at(key), Storage::kF32));
  return static_cast<const float*>(p->values[0].get<float>());
}

Expected<std::pair<const void*, Storage>> GroupRun::matrix_operand(int x, const PreparedParam& w) {
  TP_ASSIGN_OR_RETURN(Value v, value(x));
  const Storage operand = operand_for(v.src.storage, w.storage);
  if (operand == v.src.storage) return std::pair<const void*, Storage>{v.src.data, operand};
  TP_ASSIGN_OR_RETURN(const float* wide, as_f32(x));
  return std::pair<const void*, Storage>{wide, Storage::kF32};
}

Expected<DeviceMemory> GroupRun::nd_op(const Op& op, const FaultSet& f, const LayerPolicy& pol,
                                       const std::string& what) {
  const Shape& os = shape(op.output);
  const int64_t n = shape_numel(os);
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::kConv:
      return conv_nd(op, what);
    case OpKind::kLinearLast:
      return linear_last(op, what);
    case OpKind::kMultiHeadAttention:
      return multi_head_attention(op, f, pol, what);
    default:
      break;
  }
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(n * 4, what));
  float* po = out.get<float>();
  cudaStream_t st = be_.stream();
  const Shape& xs = shape(op.inputs[0]);
  TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
  switch (op.kind) {
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm: {
      const bool rms = op.kind == OpKind::kRmsNorm;
      int64_t width = rms ? xs.back() : 1;
      for (int i = int(xs.size()) - a.norm_dims; !rms && i < int(xs.size()); ++i)
        width *= xs[std::size_t(i)];
      TP_ASSIGN_OR_RETURN(const float* gamma, optional_param(op.weight));
      TP_ASSIGN_OR_RETURN(const float* beta, optional_param(rms ? "" : op.bias));
      TP_CUDA(cuda::layer_norm(x.src, n / width, width, a.eps, rms, gamma, beta, po, st), what);
      break;
    }
    case OpKind::kGelu: {
      cuda::PointwiseArgs args;
      args.op = a.tanh_approximation ? cuda::Pointwise::kGeluTanh : cuda::Pointwise::kGelu;
      TP_CUDA(cuda::pointwise(x.src, n, args, po, st), what);
      break;
    }
    case OpKind::kReshape:  // row-major: the same elements in the same order
      TP_CUDA(cuda::widen(x.src, n, po, st), what);
      break;
    case OpKind::kPermute: {
      std::vector<int64_t> in_strides(xs.size(), 1), source(xs.size());
      for (int d = int(xs.size()) - 2; d >= 0; --d)
        in_strides[std::size_t(d)] = in_strides[std::size_t(d) + 1] * xs[std::size_t(d) + 1];
      for (std::size_t d = 0; d < xs.size(); ++d) source[d] = in_strides[std::size_t(a.dims[d])];
      TP_ASSIGN_OR_RETURN(cuda::Strides s, strides(os, source, what));
      TP_CUDA(cuda::gather(x.src, s, po, st), what);
      break;
    }
    case OpKind::kBinary: {
      TP_ASSIGN_OR_RETURN(Value y, value(op.inputs[1]));
      TP_ASSIGN_OR_RETURN(cuda::Strides sa, strides(os, broadcast_strides(xs, os), what));
      TP_ASSIGN_OR_RETURN(cuda::Strides sb,
                          strides(os, broadcast_strides(shape(op.inputs[1]), os), what));
      TP_CUDA(cuda::binary(cuda::Binary(int(a.binary)), x.src, sa, y.src, sb, po, st), what);
      break;
    }
    case OpKind::kConcat: {
      const int axis = a.axis < 0 ? a.axis + int(os.size()) : a.axis;
      int64_t outer, along, inner, offset = 0;
      split_at(os, axis, outer, along, inner);
      for (int v : op.inputs) {
        TP_ASSIGN_OR_RETURN(Value part, value(v));
        const int64_t width = shape(v)[std::size_t(axis)] * inner;
        TP_CUDA(cuda::copy_blocks(part.src, outer, width, width, 0, po, along * inner,
                                  offset * inner, st),
                what);
        offset += shape(v)[std::size_t(axis)];
      }
      break;
    }
    case OpKind::kSlice: {
      const int axis = a.axis < 0 ? a.axis + int(xs.size()) : a.axis;
      int64_t outer, along, inner, begin = a.begin;
      split_at(xs, axis, outer, along, inner);
      // The faults: a half taken along the last axis (GEGLU's chunk) or the batch (guidance's)
      // is the other half.
      const bool half = 2 * os[std::size_t(axis)] == along;
      if (half && ((axis == int(xs.size()) - 1 && f.has(Fault::kGegluSwap)) ||
                   (axis == 0 && f.has(Fault::kCfgHalvesSwapped))))
        begin = (begin + along / 2) % along;
      const int64_t width = os[std::size_t(axis)] * inner;
      TP_CUDA(
          cuda::copy_blocks(x.src, outer, width, along * inner, begin * inner, po, width, 0, st),
          what);
      break;
    }
    case OpKind::kTimestepEmbedding: {
      const int64_t half = a.embedding_dim / 2;
      const bool sin_second = a.flip_sin_to_cos != f.has(Fault::kTimestepSinCosSwap);
      TP_CUDA(cuda::timestep_embedding(x.src, shape_numel(xs), a.embedding_dim, !sin_second,
                                       float(double(half) - a.shift), po, st),
              what);
      break;
    }
    case OpKind::kInterpolateNearest: {
      const int spatial = int(xs.size()) - 2;
      if (spatial < 1 || spatial > 3) return Error(what + ": resizes 1 to 3 spatial axes");
      cuda::Resize r;
      r.planes = xs[0] * xs[1];
      for (int i = 0; i < spatial; ++i) {
        const int d = 3 - spatial + i;
        r.in[d] = xs[std::size_t(i) + 2];
        r.out[d] = os[std::size_t(i) + 2];
        r.ratio[d] = float(r.in[d]) / float(r.out[d]);
      }
      TP_CUDA(cuda::interpolate_nearest(x.src, r, po, st), what);
      break;
    }
    case OpKind::kAddParameter: {
      TP_ASSIGN_OR_RETURN(const float* p, optional_param(op.weight));
      const Shape& ps = plan_.params.at(op.weight)->shape;
      TP_ASSIGN_OR_RETURN(cuda::Strides sa, strides(os, broadcast_strides(xs, os), what));
      TP_ASSIGN_OR_RETURN(cuda::Strides sp, strides(os, broadcast_strides(ps, os), what));
      TP_CUDA(cuda::binary(cuda::Binary::kAdd, x.src, sa, cuda::Src{p, cuda::Storage::kF32}, sp, po,
                           st),
              what);
      break;
    }
    case OpKind::kRotaryEmbedding: {
      const Shape& grid = shape(op.inputs[1]);
      cuda::Rotary r;
      for (std::size_t i = 0; i < 3; ++i) {
        r.grid[i] = grid[grid.size() - 3 + i];
        r.shares[i] = a.dims[i];
      }
      r.theta = a.scale;
      r.heads = a.heads;
      r.pairs = xs[2] / a.heads / 2;
      TP_CUDA(cuda::rotary_embedding(x.src, r, xs[0] * xs[1], po, st), what);
      break;
    }
    case OpKind::kUnpatchify: {  // [B,F,H,W,pt,ph,pw,C] -> [B,C,F,pt,H,ph,W,pw]
      const Shape& grid = shape(op.inputs[1]);
      const std::size_t g = grid.size() - 3;
      const Shape split{xs[0],     grid[g],   grid[g + 1], grid[g + 2],
                        a.dims[0], a.dims[1], a.dims[2],   os[1]};
      const int order[] = {0, 7, 1, 4, 2, 5, 3, 6};
      std::vector<int64_t> in_strides(split.size(), 1), source, moved;
      for (int d = int(split.size()) - 2; d >= 0; --d)
        in_strides[std::size_t(d)] = in_strides[std::size_t(d) + 1] * split[std::size_t(d) + 1];
      for (int d : order) {
        source.push_back(in_strides[std::size_t(d)]);
        moved.push_back(split[std::size_t(d)]);
      }
      TP_ASSIGN_OR_RETURN(cuda::Strides s, strides(moved, source, what));
      TP_CUDA(cuda::gather(x.src, s, po, st), what);
      break;
    }
    default:
      return Error(what + ": the CUDA backend has no kernel for op " + op_kind_name(op.kind));
  }
  return out;
}

Expected<DeviceMemory> GroupRun::conv_nd(const Op& op, const std::string& what) {
  const OpAttrs& a = op.attrs;
  const Shape& xs = shape(op.inputs[0]);
  const Shape& os = shape(op.output);
  const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
  const int spatial = int(xs.size()) - 2;
  if (spatial < 1 || spatial > 3) return Error(what + ": convolves 1 to 3 spatial axes");
  cuda::ConvNd g;
  g.cin = xs[1];
  g.cin_g = xs[1] / a.conv_groups;
  const int64_t cout = w->shape[0], cout_g = cout / a.conv_groups;
  for (int i = 0; i < spatial; ++i) {
    const int d = 3 - spatial + i;
    g.in[d] = xs[std::size_t(i) + 2];
    g.out[d] = os[std::size_t(i) + 2];
    g.k[d] = w->shape[std::size_t(i) + 2];
    g.stride[d] = a.strides[std::size_t(i)];
    g.dil[d] = a.dilations[std::size_t(i)];
    g.lo[d] = a.pads_lo[std::size_t(i)];
  }
  g.replicate = a.pad_mode == PadMode::kReplicate;
  const int64_t k = g.taps() * g.cin_g, plane = g.out_plane();
  TP_RETURN_IF_ERROR(check_weight_count(*w, cout * k));
  TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
  const Storage operand = operand_for(x.src.storage, w->storage);
  TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, operand));
  const auto* wp = static_cast<const std::byte*>(dw->values[std::size_t(operand)].get());
  const int64_t wsize = int64_t(storage_size(operand));
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(shape_numel(os) * 4, what));
  bool pointwise_conv =
      a.conv_groups == 1 && g.taps() == 1 && operand == x.src.storage && g.in_plane() == plane;
  for (int i = 0; i < 3; ++i) pointwise_conv = pointwise_conv && g.stride[i] == 1 && g.lo[i] == 0;
  if (pointwise_conv) {  // out_n [Cout][P] = W [Cout][Cin] x_n [Cin][P]
    const auto* px = static_cast<const std::byte*>(x.src.data);
    for (int64_t n = 0; n < xs[0]; ++n)
      TP_RETURN_IF_ERROR(be_.gemm(wp, px + n * g.cin * plane * wsize, operand, cout, plane, k,
                                  false, false, out.get<float>() + n * cout * plane));
  } else {
    const int64_t row_bytes = k * wsize;
    const int64_t rows =
        std::max<int64_t>(1, std::min<int64_t>(plane, kWorkspaceBytes / row_bytes));
    TP_ASSIGN_OR_RETURN(DeviceMemory patches, be_.scratch(rows * row_bytes, what + " patches"));
    for (int64_t n = 0; n < xs[0]; ++n)
      for (int64_t grp = 0; grp < a.conv_groups; ++grp)
        for (int64_t p0 = 0; p0 < plane; p0 += rows) {
          const int64_t r = std::min(rows, plane - p0);
          TP_CUDA(cuda::im2col_nd(x.src, g, n, grp, p0, r, operand, patches.get(), be_.stream()),
                  what + " patches");
          TP_RETURN_IF_ERROR(
              be_.gemm(wp + grp * cout_g * k * wsize, patches.get(), operand, cout_g, r, k, true,
                       false, out.get<float>() + (n * cout + grp * cout_g) * plane + p0, plane));
        }
  }
  TP_ASSIGN_OR_RETURN(const float* bias, optional_param(op.bias));
  TP_CUDA(cuda::scale_bias_strided(out.get<float>(), shape_numel(os), cout, plane,
                                   dw->scales.get<float>(), bias, be_.stream()),
          what + " scale and bias");
  return out;
}

Expected<DeviceMemory> GroupRun::linear_last(const Op& op, const std::string& what) {
  const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
  const int64_t din = w->shape[1], dout = w->shape[0];
  const int64_t rows = shape_numel(shape(op.inputs[0])) / din;
  TP_ASSIGN_OR_RETURN(auto x, matrix_operand(op.inputs[0], *w));
  TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, x.second));
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(rows * dout * 4, what));
  TP_RETURN_IF_ERROR(be_.gemm(x.first, dw->values[std::size_t(x.second)].get(), x.second, rows,
                              dout, din, true, false, out.get<float>()));
  TP_ASSIGN_OR_RETURN(const float* bias, optional_param(op.bias));
  TP_CUDA(cuda::scale_bias_strided(out.get<float>(), rows * dout, dout, 1, dw->scales.get<float>(),
                                   bias, be_.stream()),
          what + " scale and bias");
  return out;
}

Expected<DeviceMemory> GroupRun::multi_head_attention(const Op& op, const FaultSet& f,
                                                      const LayerPolicy& pol,
                                                      const std::string& what) {
  const bool keys_as_queries = f.has(Fault::kCrossAttentionQueryLength);
  const Shape &qs = shape(op.inputs[0]), &ks = shape(op.inputs[1]), &vs = shape(op.inputs[2]);
  cuda::AttentionShape s;
  s.batch = qs[0];
  s.queries = qs[1];
  s.heads = op.attrs.heads;
  s.stored_keys = ks[1];
  s.keys = keys_as_queries ? std::min(s.stored_keys, s.queries) : s.stored_keys;  // the fault
  s.dh = qs[2] / s.heads;
  s.dv = vs[2] / s.heads;
  s.frame_tokens =
      resolved_attention(op, op.inputs.size() > 3 ? &shape(op.inputs[3]) : nullptr).frame_tokens;
  s.scale = float(op.attrs.scale);
  s.no_max = f.has(Fault::kSoftmaxNoMax);
  TP_ASSIGN_OR_RETURN(s.activation, storage_of(pol.activation));
  // Frame-causal attention goes through the GEMMs too where its heads are wider than the row
  // kernel takes (HunyuanVideo's one 512-wide mid-block head; not yet run on a device).
  if (!attention_has_mask(op) && (s.frame_tokens <= 0 || std::max(s.dh, s.dv) > cuda::kMaxHeadDim))
    return attention_by_gemm(op, s, pol.attention_operands(), what);
  if (pol.attention_in_activation)
    return Error(what +
                 ": attn=act has CUDA kernels for unmasked attention only; run this case "
                 "on the CPU emulation (--device cpu), or leave attn= out");
  if (std::max(s.dh, s.dv) > cuda::kMaxHeadDim)
    return Error(what + ": heads of dimension " + std::to_string(std::max(s.dh, s.dv)) +
                 " have no CUDA kernel (at most " + std::to_string(cuda::kMaxHeadDim) +
                 "); run it on the CPU emulation (--device cpu)");
  TP_ASSIGN_OR_RETURN(const float* q, as_f32(op.inputs[0]));
  TP_ASSIGN_OR_RETURN(const float* k, as_f32(op.inputs[1]));
  TP_ASSIGN_OR_RETURN(const float* v, as_f32(op.inputs[2]));
  const float* mask = nullptr;
  if (attention_has_mask(op)) {
    TP_ASSIGN_OR_RETURN(mask, as_f32(op.inputs[3]));
    s.mask_batch = shape(op.inputs[3]).size() == 3 ? s.queries * s.stored_keys : 0;
  }
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(s.batch * s.queries * vs[2] * 4, what));
  TP_CUDA(cuda::multi_head_attention(q, k, v, mask, s, out.get<float>(), be_.stream()), what);
  return out;
}

Expected<DeviceMemory> GroupRun::attention_by_gemm(const Op& op, const cuda::AttentionShape& s,
                                                   DType operands, const std::string& what) {
  TP_ASSIGN_OR_RETURN(Storage operand, storage_of(operands));
  const int64_t elem = int64_t(storage_size(operand));
  const int64_t dq = s.heads * s.dh, dv = s.heads * s.dv;
  // q, k, v as the products read them: fp32, or rounded copies under attn=act.
  const void* in[3];
  DeviceMemory rounded[3];
  for (int i = 0; i < 3; ++i) {
    TP_ASSIGN_OR_RETURN(const float* x, as_f32(op.inputs[std::size_t(i)]));
    in[i] = x;
    if (operand == Storage::kF32) continue;
    const int64_t n = shape_numel(shape(op.inputs[std::size_t(i)]));
    TP_ASSIGN_OR_RETURN(rounded[i], be_.scratch(n * 2, what + " operands"));
    TP_CUDA(cuda::store_rounded(x, n, operand, rounded[i].get(), be_.stream()), what + " operands");
    in[i] = rounded[i].get();
  }
  auto at = [elem](const void* base, int64_t offset) {
    return static_cast<const std::byte*>(base) + offset * elem;
  };
  const int64_t rows = std::max<int64_t>(
      1, std::min<int64_t>(s.queries, kWorkspaceBytes / (std::max<int64_t>(1, s.keys) * 4)));
  TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(s.batch * s.queries * dv * 4, what));
  TP_ASSIGN_OR_RETURN(DeviceMemory scores, be_.scratch(rows * s.keys * 4, what + " scores"));
  DeviceMemory p16;
  if (operand != Storage::kF32) {
    TP_ASSIGN_OR_RETURN(p16, be_.scratch(rows * s.keys * 2, what + " weights"));
  }
  const void* weights = operand == Storage::kF32 ? scores.get() : p16.get();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t q0 = 0; q0 < s.queries; q0 += rows) {
        const int64_t r = std::min(rows, s.queries - q0);
        TP_RETURN_IF_ERROR(be_.gemm(at(in[0], (b * s.queries + q0) * dq + h * s.dh),
                                    at(in[1], b * s.stored_keys * dq + h * s.dh), operand, r,
                                    s.keys, s.dh, true, false, scores.get<float>(), 0, dq, dq));
        TP_CUDA(cuda::softmax_rows(scores.get<float>(), r, s.keys, s.scale, s.no_max, s.activation,
                                   be_.stream(), q0, s.frame_tokens),
                what + " softmax");
        if (operand != Storage::kF32)
          TP_CUDA(cuda::store_rounded(scores.get<float>(), r * s.keys, operand, p16.get(),
                                      be_.stream()),
                  what + " weights");
        TP_RETURN_IF_ERROR(be_.gemm(
            weights, at(in[2], b * s.stored_keys * dv + h * s.dv), operand, r, s.dv, s.keys, false,
            false, out.get<float>() + (b * s.queries + q0) * dv + h * s.dv, dv, s.keys, dv));
      }
  return out;
}

}  // namespace tp::compiled::cuda_impl
