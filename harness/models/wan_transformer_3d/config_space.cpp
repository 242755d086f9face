// WanTransformer3DModel's random valid configs. diffusers' rules: the rotary embedding splits
// attention_head_dim into frame, height and width parts (height and width 2 * (dim / 6) each,
// frames the rest), each even and at least 2, so the head dim is even and at least 6; freq_dim
// is even (the sinusoid's sin and cos halves). A patch need not divide the latent (diffusers'
// patch embedding and unpatchify floor it), so the draw makes patches of 1 or 2 frames and 1 to
// 4 pixels a side, head dims from 6 to 32 (20 among them), one to four heads, channel counts
// unlike each other and the text width unlike the model's, with and without the
// cross-attention norm.
#include "harness/models/config_space.h"

#include <nlohmann/json.hpp>

#include "harness/models/wan_transformer_3d/wan_config.h"

namespace tp {

const ConfigSpace& wan_transformer_3d_config_space() {
  static const ConfigSpace space{
      "wan_transformer_3d",
      {
          {"patch_size", "(1 or 2, 1..4, 1..4)"},
          {"num_attention_heads", "1 to 4"},
          {"attention_head_dim", "even, 6 to 32"},
          {"in_channels", "1 to 8"},
          {"out_channels", "1 to 8"},
          {"text_dim", "4 to 40"},
          {"freq_dim", "even, 4 to 64"},
          {"ffn_dim", "4 to 96"},
          {"num_layers", "1 or 2"},
          {"cross_attn_norm", "true or false"},
          {"eps", "1e-6 or 1e-5"},
      },
      [](ConfigDraw& d) {
        return nlohmann::json{
            {"_class_name", "WanTransformer3DModel"},
            {"patch_size", {d.integer(1, 2), d.integer(1, 4), d.integer(1, 4)}},
            {"num_attention_heads", d.integer(1, 4)},
            {"attention_head_dim", 2 * d.integer(3, 16)},
            {"in_channels", d.integer(1, 8)},
            {"out_channels", d.integer(1, 8)},
            {"text_dim", d.integer(4, 40)},
            {"freq_dim", 2 * d.integer(2, 32)},
            {"ffn_dim", d.integer(4, 96)},
            {"num_layers", d.integer(1, 2)},
            {"cross_attn_norm", d.chance(0.5)},
            {"eps", d.pick({1e-6, 1e-5})},
            {"qk_norm", "rms_norm_across_heads"},
            {"rope_max_seq_len", 64},
            {"added_kv_proj_dim", nullptr},
            {"image_dim", nullptr},
        };
      }};
  return space;
}

}  // namespace tp
