// AutoencoderKL's random valid configs. diffusers' rules: every GroupNorm divides its channels
// by norm_num_groups (the down and up blocks', the mid block's and its attention's, and
// conv_norm_out's), and down_block_types and up_block_types list one block per
// block_out_channels entry. The draw makes odd and non-power-of-two group counts, channels per
// group from 1 to 4, one to four levels, one or two layers per block, odd latent channels, and
// the optional parts (mid-block attention, quant_conv, post_quant_conv) on and off.
#include "harness/models/config_space.h"

#include <nlohmann/json.hpp>

#include "harness/models/autoencoder_kl/kl_config.h"

namespace tp {

const ConfigSpace& autoencoder_kl_config_space() {
  static const ConfigSpace space{
      "autoencoder_kl",
      {
          {"norm_num_groups", "1, 2, 3, 4, 5, 6 or 8"},
          {"block_out_channels", "1 to 4 levels, each norm_num_groups x 1..4"},
          {"layers_per_block", "1 or 2"},
          {"latent_channels", "1 to 6"},
          {"mid_block_add_attention", "true or false"},
          {"use_quant_conv", "true or false"},
          {"use_post_quant_conv", "true or false"},
          {"sample_size", "32 or 64 (the tiling threshold in pixels)"},
          {"scaling_factor", "0.18215 or 0.13025"},
      },
      [](ConfigDraw& d) {
        const int groups = d.pick({1, 2, 3, 4, 5, 6, 8});
        const int levels = d.integer(1, 4);
        std::vector<int> channels;
        for (int ch : d.integers(std::size_t(levels), 1, 4)) channels.push_back(groups * ch);
        return nlohmann::json{
            {"_class_name", "AutoencoderKL"},
            {"act_fn", "silu"},
            {"in_channels", 3},
            {"out_channels", 3},
            {"norm_num_groups", groups},
            {"block_out_channels", channels},
            {"down_block_types",
             std::vector<std::string>(std::size_t(levels), "DownEncoderBlock2D")},
            {"up_block_types", std::vector<std::string>(std::size_t(levels), "UpDecoderBlock2D")},
            {"layers_per_block", d.integer(1, 2)},
            {"latent_channels", d.integer(1, 6)},
            {"mid_block_add_attention", d.chance(0.75)},
            {"use_quant_conv", d.chance(0.75)},
            {"use_post_quant_conv", d.chance(0.75)},
            {"sample_size", d.pick({32, 64})},
            {"scaling_factor", d.pick({0.18215, 0.13025})},
        };
      }};
  return space;
}

}  // namespace tp
