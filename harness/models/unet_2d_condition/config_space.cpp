// UNet2DConditionModel's random valid configs. diffusers' rules: every GroupNorm divides its
// channels by norm_num_groups; attention_head_dim (the heads, in diffusers' legacy naming)
// divides each level's channels; down_block_types and up_block_types list one block per level,
// each a cross-attention block or a plain one, independently (the up blocks take the levels'
// lists reversed); the mid-block takes the last level's heads and transformer depth; one
// cross_attention_dim for every block (encoder_hidden_states is one tensor); text_time needs
// projection_class_embeddings_input_dim = the pooled text width + 6 x addition_time_embed_dim.
// The draw makes one to three levels of 2 to 24 channels (the first 4 or more) over 1, 2, 3, 4
// or 6 groups, one or two resnets and transformer layers per level, 1-4 heads of any width,
// linear or conv projections, the mid-block on or off, conv_in/conv_out kernels of 1 or 3,
// downsample padding 0 or 1, SD's plain time embedding or SDXL's text_time, flipped or not, odd
// channel counts.
#include "harness/models/config_space.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "harness/models/unet_2d_condition/unet_config.h"

namespace tp {
namespace {

const char* block(ConfigDraw& d, bool down) {
  if (d.chance(0.5)) return down ? "CrossAttnDownBlock2D" : "CrossAttnUpBlock2D";
  return down ? "DownBlock2D" : "UpBlock2D";
}

nlohmann::json draw_unet(ConfigDraw& d) {
  const int levels = d.integer(1, 3), groups = d.pick({1, 2, 3, 4, 6});
  std::vector<int> channels, heads;
  std::vector<std::string> down, up;
  for (int i = 0; i < levels; ++i) {
    // At least 2 channels (a LayerNorm row of 2 nearly equal values is judged with its
    // conditioning: harness/runner/matrix_conditioning.h); the first level at least 4: its width
    // is the time sinusoid's, and Timesteps(2, freq_shift=1) divides by half_dim - 1 = 0 (NaN in
    // diffusers itself).
    const int lowest = ((i == 0 ? 4 : 2) + groups - 1) / groups;
    int per_group = d.integer(lowest, std::max(4, lowest + 2));
    if (i == 0 && groups * per_group % 2) ++per_group;  // the time sinusoid's width is even
    channels.push_back(groups * per_group);
    const int ch = channels.back();
    std::vector<int> divisors;
    for (int h = 1; h <= 4; ++h)
      if (ch % h == 0) divisors.push_back(h);
    heads.push_back(divisors[std::size_t(d.integer(0, int(divisors.size()) - 1))]);
    down.emplace_back(block(d, true));
    up.emplace_back(block(d, false));
  }
  nlohmann::json j{
      {"_class_name", "UNet2DConditionModel"},
      {"act_fn", "silu"},
      {"in_channels", d.integer(1, 5)},
      {"out_channels", d.integer(1, 5)},
      {"block_out_channels", channels},
      {"down_block_types", down},
      {"up_block_types", up},
      {"mid_block_type", d.chance(0.75) ? nlohmann::json("UNetMidBlock2DCrossAttn") : nullptr},
      {"layers_per_block", d.integers(std::size_t(levels), 1, 2)},
      {"transformer_layers_per_block", d.integers(std::size_t(levels), 1, 2)},
      {"attention_head_dim", heads},
      {"cross_attention_dim", d.integer(3, 24)},
      {"norm_num_groups", groups},
      {"norm_eps", d.pick({1e-5, 1e-6})},
      {"use_linear_projection", d.chance(0.5)},
      {"flip_sin_to_cos", d.chance(0.5)},
      {"freq_shift", d.integer(0, 1)},
      {"center_input_sample", d.chance(0.25)},
      {"downsample_padding", d.integer(0, 1)},
      {"conv_in_kernel", d.pick({1, 3})},
      {"conv_out_kernel", d.pick({1, 3})},
      {"sample_size", 8},
  };
  if (d.chance(0.5)) {  // SDXL's added conditioning: pooled text and six time ids
    // At least 4 wide: Timesteps(2, freq_shift=1) divides by half - shift = 0 (NaN in diffusers).
    const int add = 2 * d.integer(2, 4), text = d.integer(2, 20);
    j["addition_embed_type"] = "text_time";
    j["addition_time_embed_dim"] = add;
    j["projection_class_embeddings_input_dim"] = text + 6 * add;
  }
  return j;
}

}  // namespace

const ConfigSpace& unet_2d_condition_config_space() {
  static const ConfigSpace space{
      "unet_2d_condition",
      {
          {"block_out_channels",
           "1 to 3 levels of 2 to 24 (the first 4 or more), each a multiple of norm_num_groups"},
          {"norm_num_groups", "1, 2, 3, 4 or 6"},
          {"down_block_types, up_block_types", "CrossAttn or plain, per level, independently"},
          {"mid_block_type", "UNetMidBlock2DCrossAttn or null"},
          {"layers_per_block, transformer_layers_per_block", "1 or 2 per level"},
          {"attention_head_dim", "the heads, 1 to 4 dividing each level's channels"},
          {"cross_attention_dim", "3 to 24"},
          {"in_channels, out_channels", "1 to 5"},
          {"use_linear_projection, flip_sin_to_cos, center_input_sample", "true or false"},
          {"freq_shift, downsample_padding", "0 or 1"},
          {"conv_in_kernel, conv_out_kernel", "1 or 3"},
          {"addition_embed_type", "text_time (pooled text 2-20 wide, time ids 4-8 wide) or none"},
      },
      draw_unet};
  return space;
}

}  // namespace tp
