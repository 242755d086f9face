// Which layers diffusers' layerwise casting casts, and which parameters a model keeps in fp32
// (hooks/layerwise_casting.py, models/modeling_utils.py, models/model_loading_utils.py): the
// rules the compiled path's cast=layerwise policy and the triage of a user's dump share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/graph.h"
#include "harness/core/status.h"

namespace tp {

// DEFAULT_SKIP_MODULES_PATTERN: ("pos_embed", "patch_embed", "norm", "^proj_in$", "^proj_out$").
const std::vector<std::string>& default_layerwise_skip_patterns();

// What enable_layerwise_casting skips: the default patterns, the model's _keep_in_fp32_modules
// and its _skip_layerwise_casting_patterns, as regular expressions searched in module paths.
// `globs`, when given, replace all of it (as apply_layerwise_casting's own list does: the
// model's lists are then not added), and match module paths whole (`*`, `?`).
struct LayerwiseSkips {
  std::vector<std::string> patterns;  // regular expressions (re.search)
  std::vector<std::string> globs;     // the user's own list
  bool custom = false;

  static LayerwiseSkips of(const Graph& g, const std::optional<std::vector<std::string>>& globs);
  // The pattern that leaves `module` (or one of its ancestors, whose subtree diffusers skips)
  // out of the casting; nullopt when the layer is cast.
  std::optional<std::string> skipping(const std::string& module) const;
};

// The _keep_in_fp32_modules component of the parameter `key` (from_pretrained keeps it fp32
// when one of the model's names is a dot-separated component of the key), or nullopt.
std::optional<std::string> kept_in_fp32(const Graph& g, const std::string& key);

// When diffusers' fuse_qkv_projections() ran, relative to enable_layerwise_casting: not at all,
// before (the fused Linears are wrapped like the others and compute as the three did), or after
// (the fused Linears are built from the fp8 storage and no hook casts them up: dit-facts 10.5 B).
enum class QkvFusion : uint8_t { kNone, kBeforeCast, kAfterCast };
Expected<QkvFusion> parse_qkv_fusion(std::string_view text);  // before-cast | after-cast
const char* qkv_fusion_name(QkvFusion f);                     // "" for kNone

// The Linear fuse_qkv_projections() folds the projection `op` into: `P.to_qkv` for the to_q,
// to_k and to_v of a self-attention P (the three read one input), `P.to_kv` for the to_k and
// to_v of a cross-attention; nullopt for any other op.
std::optional<std::string> fused_projection(const Graph& g, const Op& op);

}  // namespace tp
