#include "reference/torch/torch_path.h"

#include <torch/torch.h>

#include <cstring>
#include <map>

namespace tp::torch_path {
namespace {

torch::Dtype torch_dtype(DType dt) { return dt == DType::kF64 ? torch::kFloat64 : torch::kFloat32; }

torch::Tensor to_torch(const Tensor& t, DType compute) {
  Tensor converted = t.to(compute);
  return torch::from_blob(converted.raw(), t.shape(), torch_dtype(compute)).clone();
}

Tensor from_torch(const torch::Tensor& t, DType compute) {
  torch::Tensor c = t.contiguous().to(torch_dtype(compute));
  Tensor out = Tensor::uninitialized(compute, Shape(c.sizes().begin(), c.sizes().end()));
  std::memcpy(out.raw(), c.data_ptr(), out.nbytes());
  return out;
}

// [B,C,H,W] -> [B,N,C] tokens, and back.
torch::Tensor to_tokens(const torch::Tensor& x) { return x.flatten(2).transpose(1, 2); }
torch::Tensor from_tokens(const torch::Tensor& t, const torch::Tensor& like) {
  return t.transpose(1, 2).reshape({like.size(0), t.size(2), like.size(2), like.size(3)});
}

torch::Tensor run_op(const Op& op, const std::vector<torch::Tensor>& in, const torch::Tensor& w,
                     const torch::Tensor& b) {
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::kConv2d: {
      torch::Tensor x = torch::constant_pad_nd(in[0], {a.pad_left, a.pad_right, a.pad_top, a.pad_bottom}, 0);
      return torch::conv2d(x, w, b.defined() ? b : torch::Tensor(), a.stride);
    }
    case OpKind::kGroupNorm: return torch::group_norm(in[0], a.groups, w, b, a.eps);
    case OpKind::kSilu: return torch::silu(in[0]);
    case OpKind::kRelu: return torch::relu(in[0]);
    case OpKind::kTanhClamp: return torch::tanh(in[0] / a.scale) * a.scale;
    case OpKind::kAffine: return in[0] * a.scale + a.shift;
    case OpKind::kClamp: return torch::clamp(in[0], a.lo, a.hi);
    case OpKind::kUpsampleNearest2x:
      return torch::upsample_nearest2d(in[0], std::vector<int64_t>{2 * in[0].size(2), 2 * in[0].size(3)});
    case OpKind::kLinear: return from_tokens(torch::linear(to_tokens(in[0]), w, b), in[0]);
    case OpKind::kAttention: {
      torch::Tensor q = to_tokens(in[0]), k = to_tokens(in[1]), v = to_tokens(in[2]);
      torch::Tensor p = torch::softmax(torch::matmul(q, k.transpose(1, 2)) * a.scale, -1);
      return from_tokens(torch::matmul(p, v), in[0]);
    }
    case OpKind::kAdd: return in[0] + in[1];
    case OpKind::kSliceChannels: return in[0].slice(1, a.begin, a.end).contiguous();
  }
  TP_CHECK(false, "unknown op kind");
  return {};
}

}  // namespace

void set_num_threads(int threads) { torch::set_num_threads(threads); }

Expected<NamedTensors> run_graph(const Graph& graph, const Weights& weights, const NamedTensors& inputs,
                                 DType compute) {
  if (compute != DType::kF32 && compute != DType::kF64)
    return Error(std::string("the torch path computes in f32 or f64, not ") + dtype_name(compute));
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> values(graph.value_names.size());
  for (const auto& [name, id] : graph.inputs) {
    const Tensor* found = find_tensor(inputs, name);
    if (found == nullptr) return Error("graph " + graph.name + " needs an input named '" + name + "'");
    values[std::size_t(id)] = to_torch(*found, compute);
  }
  std::map<std::string, torch::Tensor> params;
  auto param = [&](const std::string& key) {
    if (key.empty()) return torch::Tensor();
    auto it = params.find(key);
    if (it != params.end()) return it->second;
    return params[key] = to_torch(weights.at(key), compute);
  };
  const std::vector<int> last = graph.last_uses();
  std::vector<bool> keep(values.size(), false);
  for (const auto& [name, id] : graph.outputs) keep[std::size_t(id)] = true;
  try {
    for (std::size_t i = 0; i < graph.ops.size(); ++i) {
      const Op& op = graph.ops[i];
      std::vector<torch::Tensor> in;
      for (int v : op.inputs) in.push_back(values[std::size_t(v)]);
      values[std::size_t(op.output)] = run_op(op, in, param(op.weight), param(op.bias));
      for (int v : op.inputs)
        if (last[std::size_t(v)] == int(i) && !keep[std::size_t(v)]) values[std::size_t(v)] = torch::Tensor();
    }
  } catch (const c10::Error& e) {
    return Error(std::string("LibTorch failed: ") + e.what_without_backtrace(), ErrorKind::kInternal);
  }
  NamedTensors out;
  for (const auto& [name, id] : graph.outputs) out.emplace_back(name, from_torch(values[std::size_t(id)], compute));
  return out;
}

}  // namespace tp::torch_path
