#include "harness/runner/activation_mapping.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "harness/core/layerwise_casting.h"
#include "harness/core/shapes.h"
#include "reference/executor.h"

namespace tp::activations {

// The dumped tensor in the layout of a graph value of `shape`: the same shape; the same
// elements in another grouping ([B, C, H*W] for [B, C, H, W]); or diffusers' token layout
// [B, H*W, C] for [B, C, H, W]. Nothing when none fits.
std::optional<Tensor> to_graph_layout(const Tensor& t, const Shape& shape) {
  Tensor f = t.to(DType::kF32);
  if (f.shape() == shape) return f;
  if (f.numel() != shape_numel(shape) || shape.empty()) return std::nullopt;
  // The same dims but for leading ones ([6, 8] for [1, 6, 8]).
  auto squeezed = [](Shape s) {
    while (s.size() > 1 && s[0] == 1) s.erase(s.begin());
    return s;
  };
  if (squeezed(f.shape()) == squeezed(shape)) return std::move(f).reshaped(shape);
  // Same leading two dims (batch, channels) and the rest flattened the same way.
  if (f.rank() >= 2 && shape.size() >= 2 && f.shape()[0] == shape[0] && f.shape()[1] == shape[1])
    return std::move(f).reshaped(shape);
  // Tokens: [B, L, C] -> [B, C, L...].
  if (f.rank() == 3 && shape.size() >= 3 && f.shape()[0] == shape[0] && f.shape()[2] == shape[1]) {
    const int64_t b = shape[0], c = shape[1], l = f.shape()[1];
    Tensor out(DType::kF32, shape);
    const float* src = f.data<float>();
    float* dst = out.data<float>();
    for (int64_t n = 0; n < b; ++n)
      for (int64_t i = 0; i < l; ++i)
        for (int64_t ch = 0; ch < c; ++ch) dst[(n * c + ch) * l + i] = src[(n * l + i) * c + ch];
    return out;
  }
  return std::nullopt;
}

bool all_finite(const Tensor& t) {
  Tensor f = t.to(DType::kF32);
  for (int64_t i = 0; i < f.numel(); ++i)
    if (!std::isfinite(f.data<float>()[i])) return false;
  return true;
}

int64_t first_non_finite(const Tensor& f) {
  for (int64_t i = 0; i < f.numel(); ++i)
    if (!std::isfinite(f.data<float>()[i])) return i;
  return -1;
}

double max_abs_finite(const Tensor& f) {
  double m = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    if (std::isfinite(f.data<float>()[i])) m = std::max(m, double(std::fabs(f.data<float>()[i])));
  return m;
}

// Relative L2 of a - b over the elements finite in both (inf when none are).
double finite_distance(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    num += (x - y) * (x - y);
    den += y * y;
    ++n;
  }
  return n == 0 ? INFINITY : std::sqrt(num / std::max(den, 1e-300));
}

bool under(const std::string& name, const std::string& path) {
  return name.size() > path.size() && name.compare(0, path.size(), path) == 0 &&
         name[path.size()] == '.';
}

OpClass op_class(OpKind k) {
  switch (k) {
    case OpKind::kConv:
    case OpKind::kLinearLast:
      return OpClass::kConv;
    case OpKind::kGroupNorm:
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
      return OpClass::kGroupNorm;
    case OpKind::kMultiHeadAttention:
      return OpClass::kAttention;
    case OpKind::kInterpolateNearest:
      return OpClass::kUpsample;
    default:
      return OpClass::kElementwise;
  }
}

// The longest sum behind one output element of `op` (harness/core/shapes.h).
int64_t reduction(const Op& op, const Weights& w, const std::vector<Shape>& shapes) {
  const auto weight = w.find(op.weight);
  return longest_sum(op, weight == w.end() ? nullptr : &weight->second.shape(),
                     [&](int v) { return &shapes[std::size_t(v)]; });
}

// Whether diffusers' layerwise casting stores a parameter in fp8: the weight or bias of a conv
// or linear of `g` the casting does not skip (harness/core/layerwise_casting.h).
bool layerwise_cast(const Graph& g, const std::string& key) {
  const LayerwiseSkips skips = LayerwiseSkips::of(g, std::nullopt);
  for (const Op& op : g.ops)
    if ((op.weight == key || op.bias == key) && is_matrix_op(op.kind))
      return !skips.skipping(op.name);
  return false;
}

// The user's weights as their stack stores them (from_pretrained with torch_dtype): every
// parameter rounded to the dump's dtype but those the model keeps in fp32, or, under layerwise
// casting, the cast layers' to fp8 e4m3 as PyTorch casts them (nearest even, saturating at 448).
Weights stored_weights(const Graph& g, const Weights& w, DType dtype, bool fp8) {
  Weights out;
  for (const auto& [key, t] : w) {
    if (fp8 && layerwise_cast(g, key))
      out.emplace(key, t.to(DType::kF8E4M3, Saturation::kSaturate).to(DType::kF32));
    else if (dtype == DType::kF32 || kept_in_fp32(g, key))
      out.emplace(key, t.to(DType::kF32));
    else
      out.emplace(key, t.to(dtype).to(DType::kF32));
  }
  return out;
}

// The ops of `graph` a dumped module path stands for.
std::vector<int> module_ops(const Graph& g, const std::string& path, int call) {
  std::vector<int> ops;
  auto named = [&](const std::string& name) {
    for (int i = 0; i < int(g.ops.size()); ++i)
      if (g.ops[std::size_t(i)].name == name) return i;
    return -1;
  };
  // ResnetBlock2D's one `nonlinearity`, called after norm1, on the time embedding (when the
  // block has one), and after norm2: act1, time_act, act2.
  const std::string suffix = ".nonlinearity";
  if (path.size() > suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    const std::string block = path.substr(0, path.size() - suffix.size());
    std::vector<int> calls;
    // The VAE's graphs name them act1, act2; the UNet's nonlinearity, time_act, nonlinearity_2.
    for (const auto& names :
         {std::vector<std::string>{".act1", ".nonlinearity"}, std::vector<std::string>{".time_act"},
          std::vector<std::string>{".act2", ".nonlinearity_2"}})
      for (const std::string& act : names)
        if (int i = named(block + act); i >= 0) {
          calls.push_back(i);
          break;
        }
    if (call < int(calls.size())) return {calls[std::size_t(call)]};
  }
  if (call > 0) return {};
  if (int i = named(path); i >= 0) return {i};
  // A composite module the graph registers (GraphBuilder::module) ends at the op making its
  // value, where later ops under its path compute something else (WanTimeTextImageEmbedding
  // returns temb first; its time and text projections follow).
  int end = -1;
  for (const auto& [module, v] : g.modules)
    if (module == path)
      for (int i = 0; i < int(g.ops.size()); ++i)
        if (g.ops[std::size_t(i)].output == v && under(g.ops[std::size_t(i)].name, path)) end = i;
  for (int i = 0; i < int(g.ops.size()) && (end < 0 || i <= end); ++i)
    if (under(g.ops[std::size_t(i)].name, path)) ops.push_back(i);
  return ops;
}

std::vector<int> externals_of(const Graph& g, const std::vector<int>& ops) {
  std::set<int> produced;
  for (int o : ops) produced.insert(g.ops[std::size_t(o)].output);
  std::vector<int> ext;
  for (int o : ops)
    for (int v : g.ops[std::size_t(o)].inputs)
      if (!produced.count(v) && std::find(ext.begin(), ext.end(), v) == ext.end()) ext.push_back(v);
  return ext;
}

// Runs `ops` of `g` alone in fp32 on `inputs` (value id -> tensor); every op's output by value.
Expected<std::map<int, Tensor>> run_ops(const Graph& g, const std::vector<int>& ops,
                                        const std::map<int, Tensor>& inputs, const Weights& w) {
  Graph sub;
  sub.name = g.name;
  sub.value_names = g.value_names;
  sub.params = g.params;
  sub.input_pixel = g.input_pixel;
  NamedTensors named;
  for (const auto& [v, t] : inputs) {
    sub.inputs.emplace_back(g.value_names[std::size_t(v)], v);
    named.emplace_back(g.value_names[std::size_t(v)], t);
  }
  for (int o : ops) sub.ops.push_back(g.ops[std::size_t(o)]);
  sub.outputs.emplace_back("out", sub.ops.back().output);
  std::map<int, Tensor> values;
  auto run = ref::run_graph(sub, w, named, DType::kF32,
                            [&](const Op& op, const Tensor& t) { values[op.output] = t; });
  if (!run.ok()) return run.error();
  return values;
}

}  // namespace tp::activations
