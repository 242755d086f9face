#include "reference/torch/torch_path.h"

#include <torch/version.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "harness/core/rotary.h"
#include "reference/torch/torch_ops.h"

namespace tp::torch_path {

torch::Dtype torch_dtype(DType dt) {
  switch (dt) {
    case DType::kF64:
      return torch::kFloat64;
    case DType::kF16:
      return torch::kFloat16;
    case DType::kBF16:
      return torch::kBFloat16;
    default:
      return torch::kFloat32;
  }
}

torch::Tensor to_torch(const Tensor& t, DType compute, const torch::Device& device) {
  Tensor converted = t.to(compute);
  return torch::from_blob(converted.raw(), t.shape(), torch_dtype(compute))
      .to(device, /*non_blocking=*/false, /*copy=*/true);
}

Tensor from_torch(const torch::Tensor& t, DType compute) {
  torch::Tensor c = t.contiguous().to(torch::kCPU).to(torch_dtype(compute));
  Tensor out = Tensor::uninitialized(compute, Shape(c.sizes().begin(), c.sizes().end()));
  std::memcpy(out.raw(), c.data_ptr(), out.nbytes());
  return out;
}

std::pair<torch::Tensor, torch::Tensor> rotary_tensors(const Op& op, const torch::Tensor& grid,
                                                       const torch::Device& device) {
  const int64_t r = grid.dim();
  RotaryTables t = rotary_tables(op.attrs.dims, op.attrs.scale, grid.size(r - 3), grid.size(r - 2),
                                 grid.size(r - 1));
  auto table = [&](std::vector<float>& v) {
    // Copied: the tables die with this call.
    return torch::from_blob(v.data(), {t.tokens, 1, t.pairs}, torch::kFloat32).to(device).clone();
  };
  return {table(t.cos), table(t.sin)};
}

torch::Tensor combine_pairs(const torch::Tensor& x, int heads, const torch::Tensor& a,
                            const torch::Tensor& b, const torch::Tensor& c,
                            const torch::Tensor& d) {
  const torch::Tensor v = x.reshape({x.size(0), x.size(1), heads, -1, 2});
  const torch::Tensor x1 = v.select(-1, 0), x2 = v.select(-1, 1);
  return torch::stack({x1 * a + x2 * b, x1 * c + x2 * d}, -1).reshape(x.sizes());
}

torch::Tensor conv_padded(const OpAttrs& a, const torch::Tensor& x) {
  // torch's pad takes (lo, hi) pairs from the last axis backwards.
  std::vector<int64_t> pads;
  for (int i = int(a.pads_lo.size()) - 1; i >= 0; --i) {
    pads.push_back(a.pads_lo[std::size_t(i)]);
    pads.push_back(a.pads_hi[std::size_t(i)]);
  }
  return a.pad_mode == PadMode::kReplicate
             ? torch::nn::functional::pad(
                   x, torch::nn::functional::PadFuncOptions(pads).mode(torch::kReplicate))
             : torch::constant_pad_nd(x, pads, 0);
}

namespace {

// Score elements one block of query rows may hold: wan-1.3b at 480x832 and 21 latent frames
// attends over 32,760 tokens with 12 heads, whose whole score matrix is 51 GB in fp32.
constexpr int64_t kScoreElements = int64_t(1) << 26;

// softmax(q k^T * scale + mask [, per-frame causal]) v over q [B,H,Lq,D], k and v [B,H,Lk,D],
// one block of query rows at a time (each row's softmax is its own, so blocks change nothing).
torch::Tensor attention_by_rows(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& mask,
                                const OpAttrs& a) {
  const int64_t lq = q.size(2), lk = k.size(2);
  const int64_t rows =
      std::clamp<int64_t>(kScoreElements / std::max<int64_t>(q.size(0) * q.size(1) * lk, 1), 1, lq);
  const torch::Tensor kf = a.frame_tokens > 0
                               ? torch::arange(lk, q.options()).div(a.frame_tokens, "floor")
                               : torch::Tensor();
  std::vector<torch::Tensor> blocks;
  for (int64_t r0 = 0; r0 < lq; r0 += rows) {
    const int64_t r1 = std::min(lq, r0 + rows);
    torch::Tensor scores = torch::matmul(q.slice(2, r0, r1), k.transpose(-1, -2)) * a.scale;
    if (mask.defined()) scores = scores + (mask.size(-2) == 1 ? mask : mask.slice(-2, r0, r1));
    if (a.frame_tokens > 0) {
      const torch::Tensor qf = torch::arange(r0, r1, q.options()).div(a.frame_tokens, "floor");
      scores = scores.masked_fill(kf.unsqueeze(0) > qf.unsqueeze(1), -INFINITY);
    }
    blocks.push_back(torch::matmul(torch::softmax(scores, -1), v));
  }
  return blocks.size() == 1 ? blocks[0] : torch::cat(blocks, 2);
}

}  // namespace

torch::Tensor run_op(const Op& op, const std::vector<torch::Tensor>& in, const torch::Tensor& w,
                     const torch::Tensor& b) {
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::kGroupNorm:
      return torch::group_norm(in[0], a.groups, w, b, a.eps);
    case OpKind::kSilu:
      return torch::silu(in[0]);
    case OpKind::kRelu:
      return torch::relu(in[0]);
    case OpKind::kTanhClamp:
      return torch::tanh(in[0] / a.scale) * a.scale;
    case OpKind::kAffine:
      return in[0] * a.scale + a.shift;
    case OpKind::kClamp:
      return torch::clamp(in[0], a.lo, a.hi);
    case OpKind::kConv: {
      const torch::Tensor x = conv_padded(a, in[0]);
      const std::vector<int64_t> stride(a.strides.begin(), a.strides.end()),
          dilation(a.dilations.begin(), a.dilations.end());
      const std::vector<int64_t> zero(stride.size(), 0);
      const torch::Tensor bias = b.defined() ? b : torch::Tensor();
      switch (stride.size()) {
        case 1:
          return torch::conv1d(x, w, bias, stride, zero, dilation, a.conv_groups);
        case 2:
          return torch::conv2d(x, w, bias, stride, zero, dilation, a.conv_groups);
        default:
          return torch::conv3d(x, w, bias, stride, zero, dilation, a.conv_groups);
      }
    }
    case OpKind::kLinearLast:
      return torch::linear(in[0], w, b.defined() ? b : torch::Tensor());
    case OpKind::kMultiHeadAttention: {
      // [B, L, H*D] -> [B, H, L, D], as diffusers' Attention.head_to_batch_dim.
      auto heads = [&](const torch::Tensor& t) {
        return t.reshape({t.size(0), t.size(1), a.heads, t.size(2) / a.heads}).transpose(1, 2);
      };
      const torch::Tensor mask = attention_has_mask(op)
                                     ? (in[3].dim() == 3 ? in[3].unsqueeze(1) : in[3])
                                     : torch::Tensor();
      const Shape fourth =
          in.size() > 3 ? Shape(in[3].sizes().begin(), in[3].sizes().end()) : Shape{};
      const OpAttrs r = resolved_attention(op, in.size() > 3 ? &fourth : nullptr);
#if TORCH_VERSION_MAJOR >= 2
      if (in[0].is_cuda() && r.frame_tokens == 0)  // what diffusers' AttnProcessor2_0 runs on a
                                                   // GPU (flash / memory-efficient kernels)
        return torch::scaled_dot_product_attention(
                   heads(in[0]), heads(in[1]), heads(in[2]),
                   mask.defined() ? std::optional(mask) : std::nullopt, 0.0, false, a.scale)
            .transpose(1, 2)
            .reshape({in[0].size(0), in[0].size(1), -1});
#endif
      const torch::Tensor o = attention_by_rows(heads(in[0]), heads(in[1]), heads(in[2]), mask, r);
      return o.transpose(1, 2).reshape({in[0].size(0), in[0].size(1), -1});
    }
    case OpKind::kLayerNorm: {
      const std::vector<int64_t> normalized(in[0].sizes().end() - a.norm_dims, in[0].sizes().end());
      return torch::layer_norm(in[0], normalized, w.defined() ? w : torch::Tensor(),
                               b.defined() ? b : torch::Tensor(), a.eps);
    }
    case OpKind::kRmsNorm: {
      torch::Tensor y = in[0] * torch::rsqrt(in[0].pow(2).mean(-1, true) + a.eps);
      return w.defined() ? y * w : y;
    }
    case OpKind::kGelu:
      return torch::gelu(in[0], a.tanh_approximation ? "tanh" : "none");
    case OpKind::kConcat:
      return torch::cat(in, a.axis);
    case OpKind::kSlice:
      return in[0].slice(a.axis, a.begin, slice_end(a, in[0].size(a.axis))).contiguous();
    case OpKind::kReshape: {
      if (in.size() == 2) return in[0].reshape(in[1].sizes());
      std::vector<int64_t> dims(a.dims.begin(), a.dims.end());
      for (std::size_t i = 0; i < dims.size(); ++i)
        if (dims[i] == 0) dims[i] = in[0].size(int64_t(i));
      return in[0].reshape(dims);
    }
    case OpKind::kPermute:
      return in[0].permute(std::vector<int64_t>(a.dims.begin(), a.dims.end())).contiguous();
    case OpKind::kBinary:
      switch (a.binary) {
        case BinaryOp::kAdd:
          return in[0] + in[1];
        case BinaryOp::kSub:
          return in[0] - in[1];
        case BinaryOp::kMul:
          return in[0] * in[1];
        case BinaryOp::kDiv:
          return in[0] / in[1];
      }
      break;
    case OpKind::kTimestepEmbedding: {
      // diffusers' get_timestep_embedding, float32 throughout, then to the path's dtype.
      const int64_t half = a.embedding_dim / 2;
      torch::Tensor exponent =
          -std::log(10000.0) *
          torch::arange(0, half, torch::dtype(torch::kFloat32).device(in[0].device()));
      exponent = exponent / (double(half) - a.shift);
      const torch::Tensor freqs = torch::exp(exponent);
      const torch::Tensor args = in[0].to(torch::kFloat32).unsqueeze(-1) * freqs;
      torch::Tensor emb = torch::cat({torch::sin(args), torch::cos(args)}, -1);
      if (a.flip_sin_to_cos)
        emb = torch::cat({emb.slice(-1, half, 2 * half), emb.slice(-1, 0, half)}, -1);
      if (a.embedding_dim % 2) emb = torch::constant_pad_nd(emb, {0, 1});
      return emb.to(in[0].scalar_type());
    }
    case OpKind::kInterpolateNearest: {
      if (in.size() == 1 && !a.dims.empty()) {  // by a factor per axis
        std::vector<int64_t> size(in[0].sizes().begin() + 2, in[0].sizes().end());
        for (std::size_t i = 0; i < size.size(); ++i) size[i] *= a.dims[i];
        return torch::nn::functional::interpolate(
            in[0],
            torch::nn::functional::InterpolateFuncOptions().size(size).mode(torch::kNearest));
      }
      if (in.size() == 1)  // upsamples_2x()
        return torch::upsample_nearest2d(
            in[0], std::vector<int64_t>{2 * in[0].size(2), 2 * in[0].size(3)});
      std::vector<int64_t> size(in[1].sizes().end() - (in[0].dim() - 2), in[1].sizes().end());
      return torch::nn::functional::interpolate(
          in[0], torch::nn::functional::InterpolateFuncOptions().size(size).mode(torch::kNearest));
    }
    case OpKind::kAddParameter:
      return in[0] + w;
    case OpKind::kRotaryEmbedding: {
      // diffusers' WanAttnProcessor: a 16-bit x times the float32 tables is float32, rounded
      // once when stored; float32 and float64 x compute in their own dtype.
      const auto [c, s] = rotary_tensors(op, in[1], in[0].device());
      const bool half = in[0].element_size() < 4;
      const torch::Tensor x = half ? in[0].to(torch::kFloat32) : in[0];
      const torch::Tensor cx = c.to(x.scalar_type()), sx = s.to(x.scalar_type());
      return combine_pairs(x, a.heads, cx, -sx, sx, cx).to(in[0].scalar_type());
    }
    case OpKind::kUnpatchify: {
      // transformer_wan.py: [B,F,H,W,pt,ph,pw,C] -> [B,C,F,pt,H,ph,W,pw], flattened in pairs.
      const int64_t r = in[1].dim(), f = in[1].size(r - 3), h = in[1].size(r - 2),
                    wd = in[1].size(r - 1);
      const int64_t pt = a.dims[0], ph = a.dims[1], pw = a.dims[2];
      return in[0]
          .reshape({in[0].size(0), f, h, wd, pt, ph, pw, -1})
          .permute({0, 7, 1, 4, 2, 5, 3, 6})
          .reshape({in[0].size(0), -1, f * pt, h * ph, wd * pw});
    }
  }
  TP_CHECK(false, "unknown op kind");
  return {};
}

namespace {

class TorchRunner final : public Runner {
 public:
  TorchRunner(const Weights& weights, DType compute, torch::Device device)
      : weights_(weights), compute_(compute), device_(device) {}

  Expected<NamedTensors> run(const Graph& graph, const NamedTensors& inputs) override {
    KeepOpenMpThreads keep_threads;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> values(graph.value_names.size());
    const std::vector<int> last = graph.last_uses();
    std::vector<bool> keep(values.size(), false);
    for (const auto& [name, id] : graph.outputs) keep[std::size_t(id)] = true;
    NamedTensors out;
    try {
      for (const auto& [name, id] : graph.inputs) {
        const Tensor* found = find_tensor(inputs, name);
        if (found == nullptr)
          return Error("graph " + graph.name + " needs an input named '" + name + "'");
        values[std::size_t(id)] = to_torch(*found, compute_, device_);
      }
      for (std::size_t i = 0; i < graph.ops.size(); ++i) {
        const Op& op = graph.ops[i];
        std::vector<torch::Tensor> in;
        for (int v : op.inputs) in.push_back(values[std::size_t(v)]);
        values[std::size_t(op.output)] = run_op(op, in, param(op.weight), param(op.bias));
        for (int v : op.inputs)
          if (last[std::size_t(v)] == int(i) && !keep[std::size_t(v)])
            values[std::size_t(v)] = torch::Tensor();
      }
      for (const auto& [name, id] : graph.outputs)
        out.emplace_back(name, from_torch(values[std::size_t(id)], compute_));
    } catch (const c10::Error& e) {
      return Error(std::string("LibTorch failed: ") + e.what_without_backtrace(),
                   ErrorKind::kInternal);
    }
    return out;
  }

 private:
  torch::Tensor param(const std::string& key) {
    if (key.empty()) return torch::Tensor();
    auto it = params_.find(key);
    if (it != params_.end()) return it->second;
    const Tensor& w = weights_.at(key);
    // On the CPU a weight already in the compute dtype is read in place (the runner never writes
    // its parameters, and the weights outlive it): no second copy of a 10 GB model.
    if (device_.is_cpu() && w.dtype() == compute_)
      return params_[key] = torch::from_blob(const_cast<std::byte*>(w.raw()), w.shape(),
                                             torch_dtype(compute_));
    return params_[key] = to_torch(w, compute_, device_);
  }

  const Weights& weights_;
  DType compute_;
  torch::Device device_;
  std::map<std::string, torch::Tensor> params_;
};

}  // namespace

void set_num_threads(int threads) { torch::set_num_threads(threads); }

bool cuda_available() { return torch::cuda::is_available(); }

Expected<std::unique_ptr<Runner>> Runner::create(const Weights& weights, DType compute, bool cuda) {
  if (cuda && !cuda_available())
    return Error(
        "this LibTorch has no CUDA device (it was built without CUDA, or none is visible); use the "
        "CPU torch path");
  const bool ok =
      cuda ? (compute == DType::kF32 || compute == DType::kF16 || compute == DType::kBF16)
           : (compute == DType::kF32 || compute == DType::kF64);
  if (!ok)
    return Error(std::string("the torch path computes in ") +
                 (cuda ? "f32, f16 or bf16 on CUDA" : "f32 or f64 on the CPU") + ", not " +
                 dtype_name(compute));
  if (cuda) {  // fp32 means fp32: no TF32 in cuDNN convolutions or cuBLAS products
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  return std::unique_ptr<Runner>(new TorchRunner(
      weights, compute, cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU)));
}

Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights,
                                 const NamedTensors& inputs, DType compute) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<Runner> runner, Runner::create(weights, compute, false));
  return runner->run(graph, inputs);
}

}  // namespace tp::torch_path
