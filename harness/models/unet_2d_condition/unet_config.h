// config.json of diffusers' UNet2DConditionModel (SD 1.5, SDXL base and refiner), with the
// constructor's defaults for every field the file omits and its per-level lists broadcast
// (unet-facts 1.1). What twinpath does not build (other block types, class embeddings, ...) is
// refused naming the field.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "harness/models/family.h"

namespace tp {

struct UnetConfig : ModelConfig {
  int in_channels = 4;
  int out_channels = 4;
  bool center_input_sample = false;
  bool flip_sin_to_cos = true;
  double freq_shift = 0;
  std::vector<std::string> down_block_types;  // CrossAttnDownBlock2D | DownBlock2D
  std::vector<std::string> up_block_types;    // CrossAttnUpBlock2D | UpBlock2D
  bool mid_block = true;                      // UNetMidBlock2DCrossAttn, or none (null)
  std::vector<int> block_out_channels;
  // Per level (broadcast from an int). attention_head_dim holds the number of heads.
  std::vector<int> layers_per_block, transformer_layers_per_block, heads, cross_attention_dim;
  int downsample_padding = 1;
  double mid_block_scale_factor = 1;
  int norm_num_groups = 32;
  double norm_eps = 1e-5;
  bool use_linear_projection = false;
  bool text_time = false;  // addition_embed_type "text_time" (SDXL)
  int addition_time_embed_dim = 0;
  int projection_class_embeddings_input_dim = 0;
  int time_embed_dim = 0;  // time_embedding_dim, else 4 * block_out_channels[0]
  int conv_in_kernel = 3, conv_out_kernel = 3;
  int sample_size = 0;

  const Family& family() const override;
  int levels() const { return int(block_out_channels.size()); }
};

// `source` names the file in error messages.
Expected<UnetConfig> parse_unet_config(const nlohmann::json& json, const std::string& source);

// The UNet's graph, "unet": inputs sample [B,C,h,w], timestep [B], encoder_hidden_states
// [B,L,Dc] (and for text_time text_embeds [B,Dt], time_ids [B,n]); output "sample".
Graph build_unet_graph(const UnetConfig& config);

struct ConfigSpace;
// The space `model=random:unet_2d_condition:SEED` draws from (config_space.cpp).
const ConfigSpace& unet_2d_condition_config_space();

}  // namespace tp
