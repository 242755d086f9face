#include "harness/core/dtype_policy.h"

namespace tp {

std::string dtypes_string(const LayerPolicy& p) {
  return std::string("w=") + dtype_name(p.weight) + ",a=" + dtype_name(p.activation) +
         ",acc=" + dtype_name(p.accumulation);
}

std::string layer_policy_string(const LayerPolicy& p) {
  std::string s = dtypes_string(p);
  if (dtype_is_fp8(p.weight))
    s += std::string(",scale=") + scale_name(p.scale) + ",sat=" + saturation_name(p.saturation);
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

}  // namespace tp
