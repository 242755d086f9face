// Dtype policies of the compiled path: how weights are stored, how activations are stored
// between fused groups, how matmuls accumulate, and which layers are kept in fp32.
//   syntax: w=f8e4m3,a=bf16,acc=f32[,scale=channel|tensor][,sat=satfinite|nonsat][,clip=Q]
// fp8 applies to conv and linear weight matrices, which carry fp32 scales chosen from the fp32
// weights (max|w| / the dtype's largest finite value, per output channel or per tensor).
// Biases and GroupNorm affine parameters are stored in the weight dtype when it is f16/bf16
// and in f32 when it is fp8 (they carry no scale).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harness/core/dtype_policy.h"

namespace tp::compiled {

using tp::layer_policy_string;
using tp::LayerPolicy;
using tp::ScaleGranularity;

struct DTypePolicy {
  LayerPolicy base;
  std::vector<std::string> keep_fp32;  // module-name globs whose layers run w=f32,a=f32

  // The policy a layer (op name, a diffusers path) runs with.
  LayerPolicy for_layer(const std::string& op_name) const;
  // Canonical text: parse(to_string()) gives the same policy; used in plan keys and reports.
  std::string to_string() const;
};

// The policy text (w=..,a=..,acc=..[,scale=..][,sat=..]), checked by check_layer_policy.
Expected<LayerPolicy> parse_layer_policy(std::string_view text);
// The storage rules every layer policy must follow (w is a storage dtype, activations f32/f16/
// bf16, accumulation f32 or f16, scale=, sat= and clip= for fp8 weights only); which w x a pairs
// have kernels is check_supported's, per layer.
Status check_layer_policy(const LayerPolicy& p);
// Comma-separated globs (`*` any run of characters, `?` one character).
Expected<std::vector<std::string>> parse_keep_fp32(std::string_view text);
bool glob_match(std::string_view pattern, std::string_view name);

// Whether the compiled path has kernels for this combination at a layer with weights.
// Refusal names the layer, both dtypes and what to change (field report 3).
Status check_supported(const std::string& layer, const LayerPolicy& p);

}  // namespace tp::compiled
