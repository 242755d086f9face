// Dtype policies of the compiled path: how weights are stored, how activations are stored
// between fused groups, how matmuls accumulate, and which layers are kept in fp32.
//   syntax: w=f8e4m3,a=bf16,acc=f32[,scale=channel|tensor][,sat=satfinite|nonsat]
// fp8 applies to conv and linear weight matrices, which carry fp32 scales chosen from the fp32
// weights (max|w| / the dtype's largest finite value, per output channel or per tensor).
// Biases and GroupNorm affine parameters are stored in the weight dtype when it is f16/bf16
// and in f32 when it is fp8 (they carry no scale).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harness/core/dtype.h"

namespace tp::compiled {

enum class ScaleGranularity : uint8_t { kPerChannel, kPerTensor };

struct LayerPolicy {
  DType weight = DType::kF16;
  DType activation = DType::kF16;
  DType accumulation = DType::kF32;
  ScaleGranularity scale = ScaleGranularity::kPerChannel;
  Saturation saturation = Saturation::kSaturate;

  bool operator==(const LayerPolicy& o) const {
    return weight == o.weight && activation == o.activation && accumulation == o.accumulation &&
           scale == o.scale && saturation == o.saturation;
  }
};

struct DTypePolicy {
  LayerPolicy base;
  std::vector<std::string> keep_fp32;  // module-name globs whose layers run w=f32,a=f32

  // The policy a layer (op name, a diffusers path) runs with.
  LayerPolicy for_layer(const std::string& op_name) const;
  // Canonical text: parse(to_string()) gives the same policy; used in plan keys and reports.
  std::string to_string() const;
};

Expected<LayerPolicy> parse_layer_policy(std::string_view text);
// Comma-separated globs (`*` any run of characters, `?` one character).
Expected<std::vector<std::string>> parse_keep_fp32(std::string_view text);
bool glob_match(std::string_view pattern, std::string_view name);

std::string layer_policy_string(const LayerPolicy& p);

// Whether the compiled path has kernels for this combination at a layer with weights.
// Refusal names the layer, both dtypes and what to change (field report 3).
Status check_supported(const std::string& layer, const LayerPolicy& p);

}  // namespace tp::compiled
