#include "harness/core/contract.h"

#include <algorithm>
#include <cmath>

#include "harness/core/compare.h"

namespace tp {
namespace {

std::string param_rounding(const ContractParam& p) {
  const std::string f32 = "exact from the checkpoint's f32, else nearest even";
  if (p.kept_in_fp32) return f32 + " (an fp32 island: the model keeps it in fp32)";
  if (p.dtype == DType::kF32) return f32;
  if (!dtype_is_fp8(p.dtype)) return "nearest even";
  if (p.unscaled)
    return std::string("nearest even, ") + saturation_name(p.saturation) +
           ", no scale (layerwise casting: a plain cast, computed in the activation dtype)";
  return std::string("nearest even of w / scale, ") + saturation_name(p.saturation) +
         "; fp32 scale " +
         (p.clip == 1 ? std::string("max|w|")
                      : "the " + clip_text(p.clip) + "-quantile of |w| (nearest rank)") +
         " / " + (p.dtype == DType::kF8E4M3 ? "448" : "57344") + " per " +
         (p.scale == ScaleGranularity::kPerChannel ? "output channel" : "tensor") +
         ", applied to the fp32 sum";
}

// t's values as f64: its own where it holds f64, else those of a converted copy in `holder`.
const double* f64_values(const Tensor& t, Tensor& holder) {
  if (t.dtype() == DType::kF64) return t.data<double>();
  holder = t.to(DType::kF64);
  return holder.data<double>();
}

}  // namespace

std::vector<ContractRow> contract_rows(const Graph& graph, const GroupContract& c) {
  std::vector<ContractRow> rows;
  auto add = [&](std::string point, std::string name, DType dt, std::string rounding) {
    rows.push_back({graph.name, c.group, std::move(point), std::move(name), dtype_name(dt),
                    std::move(rounding)});
  };
  for (const ContractValue& v : c.inputs) {
    bool pipeline = false;
    for (const auto& [name, id] : graph.inputs) pipeline = pipeline || id == v.value;
    add("input", graph.value_names[std::size_t(v.value)], v.dtype,
        pipeline ? "the pipeline's value, rounded to nearest even on upload" : "read exactly");
  }
  for (const ContractParam& p : c.params)
    add(p.bias ? "bias" : "weight", p.key, p.dtype, param_rounding(p));
  bool products = false, norm = false, softmax = false;
  for (int o : c.ops) {
    const OpKind k = graph.ops[std::size_t(o)].kind;
    products |= is_matrix_op(k) || k == OpKind::kMultiHeadAttention;
    norm |= k == OpKind::kGroupNorm || k == OpKind::kLayerNorm || k == OpKind::kRmsNorm;
    softmax |= k == OpKind::kMultiHeadAttention;
  }
  if (products)
    add("accumulator", c.label, c.accumulation,
        c.accumulation == DType::kF32 ? "any order"
                                      : "every multiply-add rounded to nearest even, in k order");
  if (norm)
    add("statistics", c.label, DType::kF64,
        "two passes; mean and 1/sd (GroupNorm) or the normalized value (LayerNorm, RMSNorm) "
        "rounded to nearest f32");
  if (softmax) add("softmax", c.label, DType::kF32, "row max subtracted before exp");
  if (softmax && c.attention_operands != DType::kF32)
    add("attention", c.label, c.attention_operands,
        "q, k, v and the normalized softmax weights rounded to nearest even before the products "
        "(attn=act)");
  add("compute", c.label, DType::kF32, "every op between the reads and the stores");
  for (const ContractValue& v : c.outputs) {
    bool island = false;
    for (int o : c.ops)
      island = island || (graph.ops[std::size_t(o)].output == v.value &&
                          graph.ops[std::size_t(o)].fp32_result);
    add("output", graph.value_names[std::size_t(v.value)], v.dtype,
        v.dtype != DType::kF32 ? "nearest even, overflow to inf"
        : island ? "as computed (an fp32 island: diffusers computes it in float32 in any dtype)"
                 : "as computed");
  }
  return rows;
}

Expected<ContractMetrics> check_contract(const Tensor& got, const ContractInterval& admitted) {
  if (got.shape() != admitted.lo.shape() || got.shape() != admitted.hi.shape())
    return Error("the contract check's interval " + shape_string(admitted.lo.shape()) +
                 " does not match the stored value " + shape_string(got.shape()));
  const DType dt = got.dtype();
  Tensor g, lo, hi;  // converted copies, where a tensor is not in f64 already
  const double* gv = f64_values(got, g);
  const double* lv = f64_values(admitted.lo, lo);
  const double* hv = f64_values(admitted.hi, hi);
  ContractMetrics m;
  m.checked = true;
  const int64_t n = got.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = gv[i], a = lv[i], b = hv[i];
    const bool nan_ok = std::isnan(a) || std::isnan(b);  // the bound itself is unknown there
    if (nan_ok || a != b)
      ++m.ambiguous;
    else
      ++m.decided;
    if (nan_ok || (x >= a && x <= b)) continue;
    const double bound = x < a ? a : b;
    const double past = std::isnan(x) ? INFINITY : std::fabs(x - bound);
    const double ulps = past / ulp_at(std::min(std::fabs(x), std::fabs(bound)), dt);
    m.toward_zero += std::fabs(x) < std::fabs(bound);
    if (m.violations++ == 0) {
      m.first = unflatten_index(i, got.shape());
      m.got = x;
      m.lo = a;
      m.hi = b;
    }
    if (!(ulps <= m.worst_ulps)) m.worst_ulps = ulps;
  }
  return m;
}

bool biased_rounding(const ContractMetrics& m) {
  const int64_t one_side = std::max(m.toward_zero, m.violations - m.toward_zero);
  return m.violations >= 10 && one_side >= 0.95 * double(m.violations);
}

}  // namespace tp
