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
    "sat=satfinite|nonsat and clip=Q, or cast=layerwise; attn=act rounds attention's operands "
    "to a=)";

}  // namespace

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
    } else if (key == "cast") {
      TP_ASSIGN_OR_RETURN(p.layerwise, parse_cast(value));
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
  if (p.layerwise && (!dtype_is_fp8(p.weight) || p.activation == DType::kF32))
    return Error(
        std::string("policy: cast=layerwise stores the cast layers in fp8 and computes in "
                    "16 bits; it needs w=f8e4m3 or w=f8e5m2 with a=bf16 or a=f16, not w=") +
        dtype_name(p.weight) + ",a=" + dtype_name(p.activation));
  if (p.layerwise && (p.scale != ScaleGranularity::kPerChannel || p.clip != 1))
    return Error(
        "policy: cast=layerwise is a plain cast without a scale; scale= and clip= belong to "
        "cast=scaled (the default)");
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

LayerPolicy DTypePolicy::for_op(const Graph& g, const Op& op, const LayerPolicy& group,
                                bool skipped_in_fp8) const {
  const std::string& key = op.weight.empty() ? op.bias : op.weight;
  if (key.empty()) return group;
  if (kept_in_fp32(g, key))
    return LayerPolicy{DType::kF32, DType::kF32, DType::kF32, base.scale, base.saturation, 1};
  if (!group.layerwise) return group;
  const bool matrix = is_matrix_op(op.kind);
  if (matrix && !skips(g).skipping(op.name)) return group;
  const DType loaded = load.value_or(group.activation);
  if (matrix && (skipped_in_fp8 || dtype_is_fp8(loaded))) return group;  // fp8, never cast up
  LayerPolicy p = group;
  p.weight = dtype_is_fp8(loaded) ? group.activation : loaded;
  p.layerwise = false;
  return p;
}

Status DTypePolicy::check_layerwise(const Graph& g, const Op& op, const LayerPolicy& group) const {
  if (!group.layerwise || !is_matrix_op(op.kind)) return Status();
  const LayerwiseSkips s = skips(g);
  const std::optional<std::string> skipped = s.skipping(op.name);
  const std::string w = dtype_name(group.weight), a = dtype_name(group.activation);
  const std::optional<std::string> kept = kept_in_fp32(g, op.weight);
  const std::string pair =
      op.name + ": weights in " + w + " with activations in " + a + " because ";
  const std::optional<std::string> fused =
      fuse_qkv == QkvFusion::kAfterCast && !skipped ? fused_projection(g, op) : std::nullopt;
  if (fused)
    return Error(
        *fused + ": weights in " + w + " with activations in " + a +
        " because fuse_qkv_projections() ran after enable_layerwise_casting: the fused "
        "Linear is built from the " +
        w +
        " storage of the projections it replaces and no hook casts it up (PyTorch: \"mat1 and "
        "mat2 must have the same dtype\"); fuse the projections before enabling the "
        "casting (fuse-qkv=before-cast) or not at all");
  if (kept && !skipped)
    return Error(pair + "cast-skip= casts this layer, which the model keeps in fp32 ('" + *kept +
                 "') and whose input it casts to the layer's dtype, so the activations would "
                 "become " +
                 w + " (PyTorch: \"mat1 and mat2 must have the same dtype\"); add '" + *kept +
                 "' to cast-skip=, or leave cast-skip= out for diffusers' own list");
  if (skipped && load && dtype_is_fp8(*load))
    return Error(pair + "the model was loaded in " + w +
                 " and layerwise casting skips the layer (pattern '" + *skipped +
                 "'), so nothing casts its " + op_label(op) +
                 "'s weight and bias up (PyTorch: \"Input type (" +
                 (group.activation == DType::kBF16 ? "BFloat16" : "Half") + ") and bias type (" +
                 (group.weight == DType::kF8E4M3 ? "Float8_e4m3fn" : "Float8_e5m2") +
                 ") should be the same\"); load the model in " + a +
                 " (leave load= out) and let cast=layerwise store the cast layers in " + w);
  return Status();
}

std::string DTypePolicy::to_string() const {
  std::string s = layer_policy_string(base);
  if (!keep_fp32.empty()) {
    s += " keep-fp32=";
    for (std::size_t i = 0; i < keep_fp32.size(); ++i) s += (i ? "," : "") + keep_fp32[i];
  }
  if (cast_skip) {
    s += " cast-skip=";
    for (std::size_t i = 0; i < cast_skip->size(); ++i) s += (i ? "," : "") + (*cast_skip)[i];
  }
  if (load) s += std::string(" load=") + dtype_name(*load);
  if (fuse_qkv != QkvFusion::kNone) s += std::string(" fuse-qkv=") + qkv_fusion_name(fuse_qkv);
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
