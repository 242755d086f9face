// config.json of diffusers' WanTransformer3DModel (Wan 2.1 text-to-video), with the
// constructor's defaults for every field the file omits (dit-facts 1.1: the defaults are the
// 14B shape) and its quirks: `qk_norm` is read but has no effect (q/k RMSNorm across heads is
// always built), `out_channels` null means `in_channels`. What twinpath does not build (the
// image-to-video conditioning, a learned position embedding) is refused naming the field.
#pragma once

#include <array>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "harness/core/status.h"
#include "harness/models/family.h"

namespace tp {

struct WanConfig : ModelConfig {
  std::array<int, 3> patch_size = {1, 2, 2};  // (t, h, w)
  int num_attention_heads = 40;
  int attention_head_dim = 128;
  int in_channels = 16;
  int out_channels = 16;
  int text_dim = 4096;
  int freq_dim = 256;
  int ffn_dim = 13824;
  int num_layers = 40;
  bool cross_attn_norm = true;
  double eps = 1e-6;
  int rope_max_seq_len = 1024;

  int inner_dim() const { return num_attention_heads * attention_head_dim; }
  // The head dimension's RoPE split (dit-facts 3): height and width 2 * (d // 6) each, the frame
  // axis the rest; each even.
  int rope_h_dim() const { return 2 * (attention_head_dim / 6); }
  int rope_w_dim() const { return rope_h_dim(); }
  int rope_t_dim() const { return attention_head_dim - rope_h_dim() - rope_w_dim(); }
  int patch_elements() const { return patch_size[0] * patch_size[1] * patch_size[2]; }
  const Family& family() const override;
};

// `source` names the file in error messages.
Expected<WanConfig> parse_wan_config(const nlohmann::json& json, const std::string& source);

// The space `model=random:wan_transformer_3d:SEED` draws from (config_space.cpp).
struct ConfigSpace;
const ConfigSpace& wan_transformer_3d_config_space();

// Every state-dict key and shape of the model, in diffusers' order (wan-1.3b-dit-keys.txt: the
// top-level table, the patch embedding, the condition embedder, the blocks, proj_out).
std::vector<ParamSpec> wan_param_specs(const WanConfig& config);

// The transformer's graph "wan": inputs hidden_states [B,C,F,H,W], timestep [B] and
// encoder_hidden_states [B,L,text_dim]; output sample [B,out_channels,F',H',W'], the sizes the
// patch divides (floored, as diffusers).
Graph build_wan_graph(const WanConfig& config);

}  // namespace tp
