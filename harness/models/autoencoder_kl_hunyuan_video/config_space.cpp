// AutoencoderKLHunyuanVideo's random valid configs. diffusers' rules: every GroupNorm divides its
// channels by norm_num_groups; down_block_types and up_block_types list one block per level;
// temporal_compression_ratio is 4 (the decoder raises on anything else), which resamples time
// twice and never at the last level, so three levels at least; spatial_compression_ratio is 2^k
// for k up to the levels. The draw makes three to five levels of 1-4 channels per group with
// odd and non-power-of-two group counts, one or two resnets per level, spatial ratios 2 to 8
// (so a 32x48 video has a latent of 4x6 to 16x24), odd latent, input and output channels, and
// the mid-block attention on and off.
#include "harness/models/config_space.h"

#include <nlohmann/json.hpp>

#include "harness/models/autoencoder_kl_hunyuan_video/hv_config.h"

namespace tp {

const ConfigSpace& autoencoder_kl_hunyuan_video_config_space() {
  static const ConfigSpace space{
      "autoencoder_kl_hunyuan_video",
      {
          {"block_out_channels", "3 to 5 levels, each norm_num_groups x 1..4"},
          {"norm_num_groups", "1, 2, 3, 4 or 6"},
          {"layers_per_block", "1 or 2"},
          {"latent_channels", "1 to 6"},
          {"in_channels", "1 to 4"},
          {"out_channels", "1 to 4"},
          {"spatial_compression_ratio", "2, 4 or 8 (at most 2^(levels - 1))"},
          {"mid_block_add_attention", "true or false"},
      },
      [](ConfigDraw& d) {
        const int levels = d.integer(3, 5), groups = d.pick({1, 2, 3, 4, 6});
        std::vector<int> channels;
        for (int i = 0; i < levels; ++i) channels.push_back(groups * d.integer(1, 4));
        return nlohmann::json{
            {"_class_name", "AutoencoderKLHunyuanVideo"},
            {"act_fn", "silu"},
            {"block_out_channels", channels},
            {"down_block_types",
             std::vector<std::string>(std::size_t(levels), "HunyuanVideoDownBlock3D")},
            {"up_block_types",
             std::vector<std::string>(std::size_t(levels), "HunyuanVideoUpBlock3D")},
            {"norm_num_groups", groups},
            {"layers_per_block", d.integer(1, 2)},
            {"latent_channels", d.integer(1, 6)},
            {"in_channels", d.integer(1, 4)},
            {"out_channels", d.integer(1, 4)},
            {"spatial_compression_ratio", 1 << d.integer(1, std::min(3, levels - 1))},
            {"temporal_compression_ratio", 4},
            {"mid_block_add_attention", d.chance(0.5)},
            {"scaling_factor", 0.476986},
        };
      }};
  return space;
}

}  // namespace tp
