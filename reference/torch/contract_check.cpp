// Each value of a group is carried as (y, e): y its value computed with LibTorch's ops in fp64
// from the group's stored inputs and the contract's weights (exact but for fp64's own rounding,
// ~1e-16, far below any bound here), e a bound on how far any correct fp32 implementation of
// the contract can be from y. Stored inputs and weights are exact (e = 0); each op adds its own
// rounding error and carries its inputs' e through its slope. The bounds hold for every
// summation order (gamma_n = n u / (1 - n u), u = 2^-24; 2^-11 for acc=f16); the rules are
// listed in docs/tolerances.md ("The contract check").
#include "reference/torch/contract_check.h"

#include <cmath>

#include "reference/torch/contract_conv.h"
#include "reference/torch/torch_ops.h"

namespace tp::torch_path {
namespace {

constexpr double kU = 0x1p-24;   // fp32 unit roundoff
constexpr double kTiny = 1e-37;  // absolute slack where fp32 results can underflow
constexpr int64_t kRows = 1024;  // query rows per block of attention scores

double gamma(double n, double u = kU) { return n * u < 0.5 ? n * u / (1 - n * u) : INFINITY; }

struct Bounded {
  torch::Tensor y, e;
};

torch::Tensor f64(const torch::Tensor& t) { return t.to(torch::kFloat64); }

// Bounds are nonnegative by construction (a NaN stays NaN either way): no abs() pass first.
bool any_error(const torch::Tensor& e) { return e.defined() && e.max().item<double>() > 0; }

// round-half-even of w / scale into fp8 with `mantissa` fraction bits, smallest normal exponent
// `min_exp` and largest finite `max`; past it: max (satfinite), NaN (e4m3) or inf (e5m2).
torch::Tensor fp8_round(const torch::Tensor& x, const ContractParam& p) {
  const bool e4m3 = p.dtype == DType::kF8E4M3;
  const int mantissa = e4m3 ? 3 : 2, min_exp = e4m3 ? -6 : -14;
  const double max = e4m3 ? 448.0 : 57344.0;
  const torch::Tensor a = x.abs();
  auto [m, ex] = torch::frexp(a);  // a = m 2^ex, m in [0.5, 1): floor(log2 a) = ex - 1
  const torch::Tensor exp = torch::clamp_min(ex.to(torch::kFloat64) - 1, min_exp);
  const torch::Tensor step = torch::pow(2.0, exp - mantissa);
  torch::Tensor r = torch::round(a / step) * step;  // torch::round: half to even
  const torch::Tensor over = r > max;
  const double past = p.saturation == Saturation::kSaturate ? max : e4m3 ? NAN : INFINITY;
  r = torch::where(over, torch::full_like(r, past), r);
  return torch::where(torch::isnan(x), x, torch::sign(x) * r);
}

// A parameter as the contract stores it, decoded to fp64 (fp8 matrices times their fp32 scale).
torch::Tensor contract_param(const Tensor& w, const ContractParam& p) {
  const torch::Tensor w64 = to_torch(w, DType::kF64, torch::kCPU);
  if (!dtype_is_fp8(p.dtype)) return f64(w64.to(torch_dtype(p.dtype)));
  if (p.unscaled) return fp8_round(w64, p);  // layerwise casting: a plain cast
  const int64_t rows = w64.size(0);
  // The clip= quantile of |w| by nearest rank (the largest at clip=1), per row or per tensor.
  const torch::Tensor a = p.scale == ScaleGranularity::kPerTensor ? w64.abs().reshape({1, -1})
                                                                  : w64.abs().reshape({rows, -1});
  const int64_t rank = clip_rank(p.clip, a.size(1));
  torch::Tensor amax = p.clip == 1 ? a.amax(1) : std::get<0>(a.sort(1)).select(1, rank);
  if (p.scale == ScaleGranularity::kPerTensor) amax = amax.expand({rows});
  torch::Tensor scale = f64((amax / dtype_max_finite(p.dtype)).to(torch::kFloat32));
  scale = torch::where(amax == 0, torch::ones_like(scale), scale);
  std::vector<int64_t> per_row(std::size_t(w64.dim()), 1);
  per_row[0] = rows;
  scale = scale.reshape(per_row);
  return fp8_round(w64 / scale, p) * scale;
}

// Rounding of n terms plus `extra` roundings, accumulating in `acc`, relative to sum |terms|.
double sum_gamma(int64_t n, int extra, DType acc) {
  return gamma(double(n + extra), acc == DType::kF16 ? 0x1p-11 : kU);
}

// An upper bound of the op's sums of nonnegative terms (k products and a bias each), computed in
// fp32 (cheaper than LibTorch's fp64 convs: ci 5-8% faster) from inputs rounded to nearest and
// raised by gamma(k + 4): that covers the inputs' roundings and any fp32 order of summation of
// nonnegative terms; what fp32 underflow loses is below kTiny. Where fp32 overflows: fp64.
torch::Tensor upper_sums(const Op& op, const torch::Tensor& x, const torch::Tensor& w,
                         const torch::Tensor& b, int64_t k) {
  auto f32 = [](const torch::Tensor& t) { return t.defined() ? t.to(torch::kFloat32) : t; };
  const torch::Tensor s = run_op(op, {f32(x)}, f32(w), f32(b));
  if (!torch::isfinite(s).all().item<bool>()) return run_op(op, {x}, w, b);
  return f64(s) * (1 + gamma(double(k + 4)));
}

Bounded products(const Op& op, const Bounded& x, const torch::Tensor& w, const torch::Tensor& b,
                 DType acc) {
  const int64_t k = w.numel() / w.size(0);
  Bounded out;
  torch::Tensor terms, carried;
  if (op.kind == OpKind::kConv) {
    ConvSums s = conv_sums(op.attrs, x.y, any_error(x.e) ? x.e : torch::Tensor(), w, b,
                           1 + gamma(double(k + 4)));
    out.y = std::move(s.y);
    terms = std::move(s.terms);
    carried = std::move(s.carried);
  } else {
    const torch::Tensor aw = w.abs();
    out.y = run_op(op, {x.y}, w, b);
    terms = upper_sums(op, x.y.abs(), aw, b.defined() ? b.abs() : b, k);
    if (any_error(x.e)) carried = upper_sums(op, x.e, aw, torch::Tensor(), k);
  }
  if (carried.defined()) terms = terms + carried;
  const double g = sum_gamma(k, 3, acc);
  out.e = g * terms + kTiny;
  if (carried.defined()) out.e = out.e + carried * (1 + g);
  if (acc == DType::kF16)  // an f16 running sum can overflow where the exact one does not
    out.e = torch::where(terms > 6e4, torch::full_like(terms, INFINITY), out.e);
  return out;
}

// A value rounded to `dt` (f16/bf16) by an implementation whose fp32 value lies in [y - e, y + e]:
// rounding is monotone, so the result lies in [round(y - e), round(y + e)], carried as that
// interval's midpoint and half-width (exact in fp64). f32: the value itself.
Bounded rounded(const Bounded& x, DType dt) {
  if (dt == DType::kF32) return x;
  auto r = [&](const torch::Tensor& t) { return f64(t.to(torch::kFloat32).to(torch_dtype(dt))); };
  const torch::Tensor e = x.e.defined() ? x.e : torch::zeros_like(x.y);
  const torch::Tensor lo = r(x.y - e), hi = r(x.y + e);
  return {(lo + hi) / 2, (hi - lo) / 2};
}

// softmax(q k^T * scale + mask) v over [N, L, D] blocks; `causal_frame` > 0 hides later frames.
// `operands` f16/bf16 (attn=act): q, k, v and the normalized weights rounded to it first.
Bounded attention(const Bounded& q_in, const Bounded& k_in, const Bounded& v_in, double scale,
                  const torch::Tensor& mask, int64_t causal_frame, DType operands) {
  const Bounded q = rounded(q_in, operands), k = rounded(k_in, operands),
                v = rounded(v_in, operands);
  const int64_t lq = q.y.size(1), lk = k.y.size(1), d = q.y.size(2);
  const bool eq = any_error(q.e), ek = any_error(k.e), ev = any_error(v.e);
  std::vector<torch::Tensor> ys, es;
  for (int64_t r0 = 0; r0 < lq; r0 += kRows) {
    const int64_t r1 = std::min(lq, r0 + kRows);
    const torch::Tensor qy = q.y.slice(1, r0, r1), kt = k.y.transpose(1, 2);
    torch::Tensor s = torch::matmul(qy, kt) * scale;
    // The scores' rounding: gamma(d + 3) of sum |q||k| scale, plus the inputs' errors carried.
    torch::Tensor terms = torch::matmul(qy.abs(), kt.abs()) * scale, carried;
    if (ek) carried = torch::matmul(qy.abs(), k.e.transpose(1, 2)) * scale;
    if (eq) {
      const torch::Tensor qe = q.e.slice(1, r0, r1);
      const torch::Tensor c = torch::matmul(qe, (k.y.abs() + k.e).transpose(1, 2)) * scale;
      carried = carried.defined() ? carried + c : c;
    }
    if (carried.defined()) terms = terms + carried;
    torch::Tensor e_s = gamma(double(d + 3)) * terms;
    if (carried.defined()) e_s = e_s + carried;
    if (mask.defined()) {
      const torch::Tensor mk = mask.dim() == 2 ? mask.slice(0, r0, r1) : mask.slice(-2, r0, r1);
      s = s + mk;
      e_s = e_s + kU * s.abs();
    }
    if (causal_frame > 0) {
      const torch::Tensor qf = torch::arange(r0, r1, s.options()).div(causal_frame, "floor");
      const torch::Tensor kf = torch::arange(lk, s.options()).div(causal_frame, "floor");
      const torch::Tensor hidden = kf.unsqueeze(0) > qf.unsqueeze(1);
      s = s.masked_fill(hidden, -INFINITY);
      e_s = e_s.masked_fill(hidden, 0);
    }
    e_s = torch::where(torch::isinf(s), torch::zeros_like(e_s), e_s);
    const torch::Tensor p = torch::softmax(s, -1);
    // Every score off by at most E moves each probability by a factor within exp(+-2E); the
    // fp32 argument s*scale - max, exp, the row sum and the division add their own.
    const torch::Tensor finite = torch::where(torch::isinf(s), torch::zeros_like(s), s.abs());
    const torch::Tensor big_e = std::get<0>(e_s.max(-1, true));
    const torch::Tensor smax = std::get<0>(finite.max(-1, true));
    const torch::Tensor rho = torch::expm1(2 * (big_e + 4 * kU * smax)) + gamma(double(lk + 8));
    if (operands != DType::kF32) {
      // The weights rounded: within [p' - e', p' + e'] of p'; then P'V in fp32 over lk terms.
      const Bounded pr = rounded({p, rho * p}, operands);
      const torch::Tensor av = v.y.abs() + v.e;
      ys.push_back(torch::matmul(pr.y, v.y));
      es.push_back(torch::matmul(pr.e, av) + torch::matmul(pr.y.abs(), v.e) +
                   gamma(double(lk + 1)) * torch::matmul(pr.y.abs() + pr.e, av) + kTiny);
      continue;
    }
    const torch::Tensor pv = torch::matmul(p, v.y.abs());
    torch::Tensor out_e = rho * pv + gamma(double(lk + 1)) * (1 + rho) * pv;
    if (ev) {
      const torch::Tensor pe = torch::matmul(p, v.e);
      out_e = out_e + pe * (1 + rho) * (1 + gamma(double(lk + 1)));
    }
    ys.push_back(torch::matmul(p, v.y));
    es.push_back(out_e);
  }
  return {torch::cat(ys, 1), torch::cat(es, 1)};
}

// The norms: GroupNorm (mean and 1/sd rounded to fp32, then (x - mean) * rstd * w + b in fp32),
// LayerNorm and RMSNorm (the normalized value rounded to fp32, then * w + b). `x` viewed as
// [rows, n] per statistic; w, b broadcast by the caller's shape.
Bounded norm(const Op& op, const Bounded& in, const torch::Tensor& w, const torch::Tensor& b) {
  const torch::Tensor& x = in.y;
  Bounded out;
  out.y = run_op(op, {x}, w, b);
  torch::Tensor rows;
  std::vector<int64_t> back(x.sizes().begin(), x.sizes().end());
  if (op.kind == OpKind::kGroupNorm)
    rows = x.reshape({x.size(0) * op.attrs.groups, -1});
  else if (op.kind == OpKind::kLayerNorm)
    rows = x.reshape({-1, [&] {
                        int64_t n = 1;
                        for (int i = 0; i < op.attrs.norm_dims; ++i) n *= x.size(x.dim() - 1 - i);
                        return n;
                      }()});
  else
    rows = x.reshape({-1, x.size(-1)});
  const bool rms = op.kind == OpKind::kRmsNorm;
  const torch::Tensor mean =
      rms ? torch::zeros({rows.size(0), 1}, rows.options()) : rows.mean(1, true);
  const torch::Tensor dev = rows - mean;
  const torch::Tensor rstd = torch::rsqrt((dev * dev).mean(1, true) + op.attrs.eps);
  torch::Tensor centered = (dev.abs() * rstd).reshape(back);  // |x - mean| / sd
  torch::Tensor shift = (kU * mean.abs() * rstd).expand_as(rows).reshape(back);
  // |w| in the value's shape: GroupNorm's per channel, the others' over the last dims.
  torch::Tensor aw = torch::ones_like(x);
  if (w.defined()) {
    if (op.kind == OpKind::kGroupNorm) {
      std::vector<int64_t> s(std::size_t(x.dim()), 1);
      s[1] = w.size(0);
      aw = w.abs().reshape(s).expand_as(x);
    } else {
      aw = w.abs().expand_as(x);
    }
  }
  out.e = aw * (shift + 5 * kU * centered) + 2 * kU * out.y.abs() + kTiny;
  if (any_error(in.e)) {  // sd is 1-Lipschitz in the rms of its inputs' change
    const torch::Tensor er = in.e.reshape(rows.sizes());
    const torch::Tensor emax = std::get<0>(er.max(1, true));
    const torch::Tensor carried =
        ((er + emax + dev.abs() * rstd * emax) * rstd).reshape(back) * aw * 1.01;
    out.e = out.e + carried;
  }
  return out;
}

Bounded pointwise(const Op& op, const std::vector<Bounded>& in, const torch::Tensor& w,
                  const torch::Tensor& b) {
  const OpAttrs& a = op.attrs;
  const torch::Tensor& x = in[0].y;
  const torch::Tensor ex = in[0].e.defined() ? in[0].e : torch::zeros_like(x);
  Bounded out;
  std::vector<torch::Tensor> ys;
  for (const Bounded& v : in) ys.push_back(v.y);
  out.y = run_op(op, ys, w, b);
  const torch::Tensor ay = out.y.abs();
  switch (op.kind) {
    case OpKind::kSilu:  // slope <= 1.1; expf, the sum and the quotient within 6 ulps
      out.e = 1.1 * ex + 8 * kU * ay + kTiny;
      return out;
    case OpKind::kRelu:
      out.e = ex;
      return out;
    case OpKind::kGelu: {  // slope <= 1.13; erf's argument and erf, or tanh's cubic argument
      const torch::Tensor ax = x.abs();
      const torch::Tensor arg = a.tanh_approximation ? 0.8 * ax + 0.036 * ax * ax * ax : ax;
      out.e = 1.13 * ex + 8 * kU * ay + kU * ax * (2 + 4 * arg) + kTiny;
      return out;
    }
    case OpKind::kTanhClamp:
      out.e = ex + kU * x.abs() + 4 * kU * ay + kTiny;
      return out;
    case OpKind::kAffine:
      out.e = std::abs(a.scale) * ex * (1 + kU) + 3 * kU * (x.abs() * std::abs(a.scale)) +
              kU * (ay + std::abs(a.shift));
      return out;
    case OpKind::kClamp:
      out.e = ex + kU * ay;
      return out;
    case OpKind::kAddParameter:  // the stored parameter is exact
      out.e = ex + kU * (ay + ex) + kTiny;
      return out;
    case OpKind::kRotaryEmbedding: {  // x1 c - x2 s: two products and a sum, each rounded
      const auto [c, s] = rotary_tensors(op, in[1].y, x.device());
      const torch::Tensor ac = c.abs().to(x.scalar_type()), as = s.abs().to(x.scalar_type());
      const torch::Tensor carried = combine_pairs(ex, a.heads, ac, as, as, ac);
      const torch::Tensor size = combine_pairs(x.abs(), a.heads, ac, as, as, ac);
      out.e = carried + 3 * kU * (size + carried) + kTiny;
      return out;
    }
    case OpKind::kBinary: {
      const torch::Tensor& z = in[1].y;
      const torch::Tensor ez = in[1].e.defined() ? in[1].e : torch::zeros_like(z);
      torch::Tensor carried;
      switch (a.binary) {
        case BinaryOp::kAdd:
        case BinaryOp::kSub:
          carried = ex + ez;
          break;
        case BinaryOp::kMul:
          carried = z.abs() * ex + x.abs() * ez + ex * ez;
          break;
        case BinaryOp::kDiv: {
          const torch::Tensor room = z.abs() - ez;
          carried = torch::where(room > 0, (ex + ay * ez) / room, torch::full_like(ay, INFINITY));
          break;
        }
      }
      out.e = carried + kU * (ay + carried) + kTiny;
      return out;
    }
    default:
      break;
  }
  TP_CHECK(false, std::string("no contract rule for ") + op_kind_name(op.kind));
  return out;
}

// Ops that move elements without arithmetic: the same op on the bound.
bool moves_only(OpKind k) {
  return k == OpKind::kConcat || k == OpKind::kSlice || k == OpKind::kReshape ||
         k == OpKind::kPermute || k == OpKind::kInterpolateNearest || k == OpKind::kUnpatchify;
}

Bounded run_bounded(const Op& op, const std::vector<Bounded>& in, const torch::Tensor& w,
                    const torch::Tensor& b, DType acc, DType attention_operands) {
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::kConv:
    case OpKind::kLinearLast:
      return products(op, in[0], w, b, acc);
    case OpKind::kGroupNorm:
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
      return norm(op, in[0], w, b);
    case OpKind::kMultiHeadAttention: {
      auto heads = [&](const torch::Tensor& t) {  // [B, L, H*D] -> [B*H, L, D]
        return t.reshape({t.size(0), t.size(1), a.heads, t.size(2) / a.heads})
            .transpose(1, 2)
            .reshape({t.size(0) * a.heads, t.size(1), t.size(2) / a.heads});
      };
      const int64_t batch = in[0].y.size(0), lq = in[0].y.size(1);
      torch::Tensor mask;
      const Shape fourth =
          in.size() > 3 ? Shape(in[3].y.sizes().begin(), in[3].y.sizes().end()) : Shape{};
      const OpAttrs r = resolved_attention(op, in.size() > 3 ? &fourth : nullptr);
      if (attention_has_mask(op)) {  // [Lq,Lk] or [B,Lq,Lk] -> per (batch, head)
        mask = in[3].y;
        if (mask.dim() == 3)
          mask = mask.unsqueeze(1)
                     .expand({batch, a.heads, lq, mask.size(2)})
                     .reshape({batch * a.heads, lq, mask.size(2)});
      }
      Bounded o = attention({heads(in[0].y), heads(in[0].e)}, {heads(in[1].y), heads(in[1].e)},
                            {heads(in[2].y), heads(in[2].e)}, a.scale, mask, r.frame_tokens,
                            attention_operands);
      auto merge = [&](const torch::Tensor& t) {
        return t.reshape({batch, a.heads, lq, t.size(2)}).transpose(1, 2).reshape({batch, lq, -1});
      };
      return {merge(o.y), merge(o.e)};
    }
    case OpKind::kTimestepEmbedding: {
      // fp32 throughout, as diffusers: the argument t * exp(-ln(1e4) i / half) rounds to within
      // (10 + 8) u of |t|, sin and cos a few ulps.
      Bounded out;
      out.y = f64(run_op(op, {in[0].y.to(torch::kFloat32)}, w, b));
      const double t = in[0].y.abs().max().item<double>();
      out.e = torch::full_like(out.y, 20 * kU * t + 8 * kU);
      return out;
    }
    default:
      break;
  }
  if (moves_only(op.kind)) {
    std::vector<torch::Tensor> ys, es;
    for (const Bounded& v : in) {
      ys.push_back(v.y);
      es.push_back(v.e.defined() ? v.e : torch::zeros_like(v.y));
    }
    return {run_op(op, ys, w, b), run_op(op, es, w, b)};
  }
  return pointwise(op, in, w, b);
}

// The stored value for `v` rounded into `dt` with LibTorch's conversions (f64 -> f32 -> dt:
// monotone, so the ends of [y - e, y + e] bound every correctly rounded fp32 result).
Tensor stored(const torch::Tensor& v, DType dt) {
  torch::Tensor r = v.to(torch::kFloat32);
  if (dt != DType::kF32) r = r.to(torch_dtype(dt));
  return from_torch(r, dt);
}

}  // namespace

Tensor contract_weights(const Tensor& w, const ContractParam& p) {
  return from_torch(contract_param(w, p), DType::kF64);
}

Expected<std::vector<ContractInterval>> contract_intervals(const Graph& graph,
                                                           const GroupContract& c,
                                                           const Weights& weights,
                                                           const std::map<int, Tensor>& inputs) {
  KeepOpenMpThreads keep_threads;
  torch::NoGradGuard no_grad;
  std::vector<ContractInterval> out;
  try {
    std::map<int, Bounded> values;
    for (const ContractValue& in : c.inputs) {
      auto it = inputs.find(in.value);
      if (it == inputs.end())
        return Error("the contract check of group " + std::to_string(c.group) + " needs " +
                     graph.value_names[std::size_t(in.value)] + ", which was not captured");
      // An input given in another dtype (the pipeline's) is rounded into its storage first.
      torch::Tensor t = to_torch(it->second, it->second.dtype(), torch::kCPU);
      if (it->second.dtype() != in.dtype) t = t.to(torch_dtype(in.dtype));
      const torch::Tensor y = f64(t);
      values[in.value] = {y, torch::zeros_like(y)};
    }
    std::map<std::string, torch::Tensor> params;
    for (const ContractParam& p : c.params) {
      auto w = weights.find(p.key);
      if (w == weights.end()) return Error("the contract check needs weight " + p.key);
      params[p.key] = contract_param(w->second, p);
    }
    auto param = [&](const std::string& key) {
      return key.empty() ? torch::Tensor() : params.at(key);
    };
    for (int o : c.ops) {
      const Op& op = graph.ops[std::size_t(o)];
      std::vector<Bounded> in;
      for (int v : op.inputs) {
        auto it = values.find(v);
        if (it == values.end())
          return Error("the contract check of group " + std::to_string(c.group) + " has no value " +
                       graph.value_names[std::size_t(v)]);
        in.push_back(it->second);
      }
      values[op.output] = run_bounded(op, in, param(op.weight), param(op.bias), c.accumulation,
                                      c.attention_operands);
    }
    for (const ContractValue& v : c.outputs) {
      const Bounded& b = values.at(v.value);
      // A hair of slack for fp64's own rounding of y and e.
      const torch::Tensor e = b.e * (1 + 0x1p-40) + 1e-300;
      out.push_back({stored(b.y - e, v.dtype), stored(b.y + e, v.dtype)});
    }
  } catch (const c10::Error& e) {
    return Error(
        std::string("the contract check's LibTorch ops failed: ") + e.what_without_backtrace(),
        ErrorKind::kInternal);
  }
  return out;
}

}  // namespace tp::torch_path
