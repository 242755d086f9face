// Dtype policies of the compiled path: how weights are stored, how activations are stored
// between fused groups, how matmuls accumulate, and which layers are kept in fp32.
//   syntax: w=f8e4m3,a=bf16,acc=f32[,scale=channel|tensor][,sat=satfinite|nonsat][,clip=Q]
// fp8 applies to conv and linear weight matrices, which carry fp32 scales chosen from the fp32
// weights (max|w| / the dtype's largest finite value, per output channel or per tensor).
// Biases and GroupNorm affine parameters are stored in the weight dtype when it is f16/bf16
// and in f32 when it is fp8 (they carry no scale).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/dtype_policy.h"
#include "harness/core/graph.h"
#include "harness/core/layerwise_casting.h"
#include "harness/core/names.h"

namespace tp::compiled {

using tp::layer_policy_string;
using tp::LayerPolicy;
using tp::ScaleGranularity;

struct DTypePolicy {
  LayerPolicy base;
  std::vector<std::string> keep_fp32;  // module-name globs whose layers run w=f32,a=f32
  // cast=layerwise: module globs that replace diffusers' skip list (cast-skip=), and the dtype
  // the model was loaded in before the casting was enabled (load=; the activation dtype when
  // not given), which the layers the casting skips keep.
  std::optional<std::vector<std::string>> cast_skip = std::nullopt;
  std::optional<DType> load = std::nullopt;
  // cast=layerwise: when fuse_qkv_projections() ran (fuse-qkv=). Fused before the casting, the
  // fused Linears compute exactly as the three did (no scale: each element is cast alone), so
  // the plan runs the three.
  QkvFusion fuse_qkv = QkvFusion::kNone;

  // The policy a layer (op name, a diffusers path) runs with.
  LayerPolicy for_layer(const std::string& op_name) const;
  // The policy op `op`'s parameters are stored in and its products computed with, in a group
  // running `group`: parameters the model keeps in fp32 (Graph::keep_in_fp32_modules) make it
  // f32; under cast=layerwise the layers the casting skips and every non-matrix parameter stay
  // in the load dtype (fp8 ones unscaled), the cast layers in fp8. `skipped_in_fp8` leaves the
  // skipped layers in fp8 whatever load= says (the cast-skips-submodule fault).
  LayerPolicy for_op(const Graph& g, const Op& op, const LayerPolicy& group,
                     bool skipped_in_fp8 = false) const;
  // What layerwise casting would hand a kernel in mismatched dtypes (field report 3), refused
  // with the layer, both dtypes and the fix: a skipped layer loaded in fp8, a module the model
  // keeps in fp32 cast by a custom skip list, projections fused after the casting was enabled.
  Status check_layerwise(const Graph& g, const Op& op, const LayerPolicy& group) const;
  LayerwiseSkips skips(const Graph& g) const { return LayerwiseSkips::of(g, cast_skip); }
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
using tp::glob_match;

// Whether the compiled path has kernels for this combination at a layer with weights.
// Refusal names the layer, both dtypes and what to change (field report 3).
Status check_supported(const std::string& layer, const LayerPolicy& p);

}  // namespace tp::compiled
