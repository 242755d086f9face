// A dtype policy for one layer: how its weights are stored, how activations are stored between
// fused groups, how matmuls accumulate, and (fp8 weights) how scales are chosen and values
// saturate. A plain value that cases, reports and the compiled path share; which combinations
// have kernels is the compiled path's question (compiled/policy.h check_layer_policy).
//   text: w=f8e4m3,a=bf16,acc=f32[,scale=channel|tensor][,sat=satfinite|nonsat][,clip=Q][,attn=act]
//   or    w=f8e4m3,a=bf16,acc=f32,cast=layerwise[,sat=satfinite|nonsat]
#pragma once

#include <string>
#include <string_view>

#include "harness/core/dtype.h"

namespace tp {

enum class ScaleGranularity : uint8_t { kPerChannel, kPerTensor };

struct LayerPolicy {
  DType weight = DType::kF16;
  DType activation = DType::kF16;
  DType accumulation = DType::kF32;
  ScaleGranularity scale = ScaleGranularity::kPerChannel;
  Saturation saturation = Saturation::kSaturate;
  // fp8 scale calibration: the scale maps the Q-quantile of |w| (nearest rank, per channel or
  // per tensor) to the format's largest finite value. 1 is the largest weight (every weight
  // fits); below 1 the weights above it saturate or overflow as `saturation` says, as
  // percentile-calibrated checkpoints do.
  double clip = 1;
  // attn=act: attention's q, k and v, and its softmax weights P, are rounded to the activation
  // dtype before the two products (as PyTorch's f16/bf16 attention kernels do, and as tensor
  // cores need); the products still accumulate in fp32 and the softmax runs in fp32. Default
  // (attn=f32): attention is fp32 throughout, like every other op inside a group.
  bool attention_in_activation = false;
  // cast=layerwise (fp8 weights only): diffusers' enable_layerwise_casting. The layers it casts
  // store weight and bias in fp8 by a plain cast (no scale; `saturation` as the cast does) and
  // compute in the activation dtype; every other parameter stays in the activation dtype (or
  // fp32, where the model keeps it so). Default (cast=scaled): fp32 scales, fp32 biases.
  bool layerwise = false;

  bool operator==(const LayerPolicy& o) const {
    return weight == o.weight && activation == o.activation && accumulation == o.accumulation &&
           scale == o.scale && saturation == o.saturation && clip == o.clip &&
           attention_in_activation == o.attention_in_activation && layerwise == o.layerwise;
  }
  // The dtype attention's operands are rounded to: the activation dtype under attn=act, else f32.
  DType attention_operands() const { return attention_in_activation ? activation : DType::kF32; }
};

// Canonical text: scale= and sat= appear for fp8 weights only (cast=layerwise in place of
// scale=), clip= when below 1, attn=act when set.
std::string layer_policy_string(const LayerPolicy& p);
// "w=f16,a=f16,acc=f32": the three dtypes alone.
std::string dtypes_string(const LayerPolicy& p);

const char* scale_name(ScaleGranularity s);  // "channel" | "tensor"
const char* saturation_name(Saturation s);   // "satfinite" | "nonsat"
Expected<ScaleGranularity> parse_scale(std::string_view text);
Expected<Saturation> parse_saturation(std::string_view text);
// clip=Q: a quantile in (0, 1]; clip_text writes it back (shortest round trip).
Expected<double> parse_clip(std::string_view text);
// attn=f32|act (true: act).
Expected<bool> parse_attention(std::string_view text);
// cast=scaled|layerwise (true: layerwise).
Expected<bool> parse_cast(std::string_view text);
std::string clip_text(double q);
// The 0-based rank, in ascending |w| of n weights, of the Q-quantile by nearest rank:
// ceil(Q n) - 1 (n - 1, the largest, at Q = 1).
int64_t clip_rank(double q, int64_t n);

}  // namespace tp
