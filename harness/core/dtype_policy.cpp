#include "harness/core/dtype_policy.h"

#include <charconv>
#include <cmath>

namespace tp {

std::string dtypes_string(const LayerPolicy& p) {
  return std::string("w=") + dtype_name(p.weight) + ",a=" + dtype_name(p.activation) +
         ",acc=" + dtype_name(p.accumulation);
}

std::string layer_policy_string(const LayerPolicy& p) {
  std::string s = dtypes_string(p);
  if (dtype_is_fp8(p.weight))
    s += std::string(p.layerwise ? ",cast=layerwise"
                                 : std::string(",scale=") + scale_name(p.scale)) +
         ",sat=" + saturation_name(p.saturation);
  if (dtype_is_fp8(p.weight) && p.clip != 1) s += ",clip=" + clip_text(p.clip);
  if (p.attention_in_activation) s += ",attn=act";
  return s;
}

const char* scale_name(ScaleGranularity s) {
  return s == ScaleGranularity::kPerChannel ? "channel" : "tensor";
}

const char* saturation_name(Saturation s) {
  return s == Saturation::kSaturate ? "satfinite" : "nonsat";
}

Expected<ScaleGranularity> parse_scale(std::string_view text) {
  if (text == "channel") return ScaleGranularity::kPerChannel;
  if (text == "tensor") return ScaleGranularity::kPerTensor;
  return Error("scale=" + std::string(text) + " is unknown; use scale=channel or scale=tensor");
}

Expected<Saturation> parse_saturation(std::string_view text) {
  if (text == "satfinite") return Saturation::kSaturate;
  if (text == "nonsat") return Saturation::kNonSaturating;
  return Error("sat=" + std::string(text) + " is unknown; use sat=satfinite or sat=nonsat");
}

Expected<double> parse_clip(std::string_view text) {
  double q = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), q);
  if (ec != std::errc() || end != text.data() + text.size() || !(q > 0 && q <= 1))
    return Error("clip=" + std::string(text) +
                 " is not a quantile in (0, 1]; write clip=0.999 to map the 99.9th percentile of "
                 "|w| to the format's largest value (clip=1, the largest weight, is the default)");
  return q;
}

Expected<bool> parse_attention(std::string_view text) {
  if (text == "f32") return false;
  if (text == "act") return true;
  return Error("attn=" + std::string(text) +
               " is unknown; use attn=act (attention's q, k, v and softmax weights rounded to the "
               "activation dtype, as f16/bf16 attention kernels do) or attn=f32 (the default)");
}

Expected<bool> parse_cast(std::string_view text) {
  if (text == "scaled") return false;
  if (text == "layerwise") return true;
  return Error("cast=" + std::string(text) +
               " is unknown; use cast=layerwise (diffusers' enable_layerwise_casting: the block "
               "layers' weights and biases cast to fp8 without a scale, computed in the "
               "activation dtype) or cast=scaled (the default: fp32 scales, fp32 biases)");
}

int64_t clip_rank(double q, int64_t n) {
  const int64_t k = int64_t(std::ceil(q * double(n))) - 1;
  return k < 0 ? 0 : k >= n ? n - 1 : k;
}

std::string clip_text(double q) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, q);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

}  // namespace tp
