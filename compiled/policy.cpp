#include "compiled/policy.h"

namespace tp::compiled {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

const char* kSyntax =
    "write it as w=f16,a=f16,acc=f32 (fp8 weights also take scale=channel|tensor, "
    "sat=satfinite|nonsat and clip=Q; attn=act rounds attention's operands to a=)";

}  // namespace

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative matcher with one backtrack point for the last `*`.
  std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

Expected<LayerPolicy> parse_layer_policy(std::string_view text) {
  LayerPolicy p;
  bool have_w = false, have_a = false;
  for (std::string_view item : split(text, ',')) {
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return Error("policy '" + std::string(text) + "': '" + std::string(item) +
                   "' is not key=value; " + kSyntax);
    const std::string key(item.substr(0, eq));
    const std::string_view value = item.substr(eq + 1);
    if (key == "w" || key == "a" || key == "acc") {
      auto dt = parse_dtype(value);
      if (!dt.ok()) return dt.error().with_context("policy '" + std::string(text) + "', " + key);
      (key == "w" ? p.weight : key == "a" ? p.activation : p.accumulation) = *dt;
      have_w = have_w || key == "w";
      have_a = have_a || key == "a";
    } else if (key == "scale") {
      TP_ASSIGN_OR_RETURN(p.scale, parse_scale(value));
    } else if (key == "sat") {
      TP_ASSIGN_OR_RETURN(p.saturation, parse_saturation(value));
    } else if (key == "clip") {
      TP_ASSIGN_OR_RETURN(p.clip, parse_clip(value));
    } else if (key == "attn") {
      TP_ASSIGN_OR_RETURN(p.attention_in_activation, parse_attention(value));
    } else {
      return Error("policy '" + std::string(text) + "': unknown key '" + key + "'; " + kSyntax);
    }
  }
  if (!have_w || !have_a)
    return Error("policy '" + std::string(text) + "' needs both w= and a=; " + kSyntax);
  TP_RETURN_IF_ERROR(check_layer_policy(p));
  return p;
}

Status check_layer_policy(const LayerPolicy& p) {
  if (p.weight == DType::kF64)
    return Error(
        "policy: w=f64 is not a storage dtype of the compiled path; use w=f32, f16, bf16, "
        "f8e4m3 or f8e5m2 (or the reference:fp64 path)");
  if (p.activation != DType::kF32 && p.activation != DType::kF16 && p.activation != DType::kBF16)
    return Error(std::string("policy: activations are stored in f32, f16 or bf16, not ") +
                 dtype_name(p.activation) +
                 "; fp8 is a weight dtype (w=" + dtype_name(p.activation) + ")");
  if (p.accumulation != DType::kF32 && p.accumulation != DType::kF16)
    return Error(std::string("policy: acc=") + dtype_name(p.accumulation) +
                 " is not an accumulation dtype of the compiled path; use acc=f32 (or acc=f16, "
                 "to reproduce field bugs)");
  if (!dtype_is_fp8(p.weight) && (p.scale != ScaleGranularity::kPerChannel ||
                                  p.saturation != Saturation::kSaturate || p.clip != 1))
    return Error("policy: scale=, sat= and clip= apply to fp8 weights only (w=f8e4m3 or w=f8e5m2)");
  if (p.attention_in_activation && p.activation == DType::kF32)
    return Error(
        "policy: attn=act rounds attention's operands to the activation dtype, and a=f32 has "
        "nothing to round them to; use a=f16 or a=bf16 with it, or leave attn= out");
  return Status();
}

Expected<std::vector<std::string>> parse_keep_fp32(std::string_view text) {
  std::vector<std::string> globs;
  if (text.empty()) return globs;
  for (std::string_view g : split(text, ',')) {
    if (g.empty())
      return Error("--keep-fp32 '" + std::string(text) +
                   "' has an empty pattern; separate module globs with single commas");
    globs.emplace_back(g);
  }
  return globs;
}

LayerPolicy DTypePolicy::for_layer(const std::string& op_name) const {
  for (const std::string& g : keep_fp32)
    if (glob_match(g, op_name))
      return LayerPolicy{DType::kF32, DType::kF32, DType::kF32, base.scale, base.saturation, 1};
  return base;
}

std::string DTypePolicy::to_string() const {
  std::string s = layer_policy_string(base);
  if (!keep_fp32.empty()) {
    s += " keep-fp32=";
    for (std::size_t i = 0; i < keep_fp32.size(); ++i) s += (i ? "," : "") + keep_fp32[i];
  }
  return s;
}

Status check_supported(const std::string& layer, const LayerPolicy& p) {
  const std::string w = dtype_name(p.weight), a = dtype_name(p.activation);
  const std::string where = layer + ": weights in " + w + " with activations in " + a;
  if (p.accumulation == DType::kF16 && !(p.weight == DType::kF16 && p.activation == DType::kF16))
    return Error(where +
                 " cannot accumulate in f16 (f16 accumulation exists only as w=f16,a=f16,acc=f16, "
                 "to reproduce field bugs); use acc=f32");
  if (p.activation == DType::kF32 || p.weight == p.activation || dtype_is_fp8(p.weight))
    return Status();
  // 16-bit activations: the GEMMs take weights in the activation dtype or fp8 (dequantized
  // exactly into it); no kernel mixes f16 with bf16 or reads f32 weights.
  return Error(where + " is not a combination the compiled path has kernels for; use w=" + a +
               (p.weight == DType::kF32 ? "" : " or a=" + w) +
               ", or keep this layer in fp32 with --keep-fp32 '" + layer + "'");
}

}  // namespace tp::compiled
