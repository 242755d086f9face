#include "harness/models/unet_2d_condition/unet_config.h"

#include "harness/core/json_config.h"
#include "harness/core/untrusted_json.h"
#include "harness/models/unet_2d_condition/family.h"

namespace tp {
namespace {

using nlohmann::json;

// A field twinpath builds only at one value (diffusers' default, which SD and SDXL use).
template <class T>
Status expect_value(const json& j, const char* key, const T& want, const std::string& source,
                    const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  T got{};
  TP_RETURN_IF_ERROR(read_field(j, key, got, source));
  if (got != want)
    return Error(source + ": " + key + " " + it->dump() + " is not supported; twinpath builds " +
                 what);
  return Status();
}

}  // namespace

const Family& UnetConfig::family() const { return unet_2d_condition_family(); }

Expected<UnetConfig> parse_unet_config(const json& j, const std::string& src) {
  if (!j.is_object()) return Error(src + ": config must be a JSON object");
  UnetConfig c;
  c.down_block_types = {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                        "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                      "CrossAttnUpBlock2D"};
  c.block_out_channels = {320, 640, 1280, 1280};
  TP_RETURN_IF_ERROR(read_field(j, "in_channels", c.in_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "out_channels", c.out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "center_input_sample", c.center_input_sample, src));
  TP_RETURN_IF_ERROR(read_field(j, "flip_sin_to_cos", c.flip_sin_to_cos, src));
  TP_RETURN_IF_ERROR(read_field(j, "freq_shift", c.freq_shift, src));
  TP_RETURN_IF_ERROR(read_field(j, "down_block_types", c.down_block_types, src));
  TP_RETURN_IF_ERROR(read_field(j, "up_block_types", c.up_block_types, src));
  TP_RETURN_IF_ERROR(read_field(j, "block_out_channels", c.block_out_channels, src));
  const std::size_t levels = c.block_out_channels.size();
  if (levels == 0 || c.down_block_types.size() != levels || c.up_block_types.size() != levels)
    return Error(src + ": block_out_channels, down_block_types and up_block_types must list the " +
                 "same number (at least one) of blocks");
  for (const std::string& t : c.down_block_types)
    if (t != "CrossAttnDownBlock2D" && t != "DownBlock2D")
      return Error(src + ": down block type '" + t +
                   "' is not supported; twinpath builds CrossAttnDownBlock2D and DownBlock2D");
  for (const std::string& t : c.up_block_types)
    if (t != "CrossAttnUpBlock2D" && t != "UpBlock2D")
      return Error(src + ": up block type '" + t +
                   "' is not supported; twinpath builds CrossAttnUpBlock2D and UpBlock2D");
  if (auto it = j.find("mid_block_type"); it != j.end()) {
    if (it->is_null()) {
      c.mid_block = false;
    } else if (*it != "UNetMidBlock2DCrossAttn") {
      return Error(src + ": mid_block_type " + it->dump() +
                   " is not supported; twinpath builds UNetMidBlock2DCrossAttn (or null)");
    }
  }
  c.layers_per_block.assign(levels, 2);
  c.transformer_layers_per_block.assign(levels, 1);
  c.heads.assign(levels, 8);
  c.cross_attention_dim.assign(levels, 1280);
  TP_RETURN_IF_ERROR(read_per_level(j, "layers_per_block", c.layers_per_block, levels, src));
  TP_RETURN_IF_ERROR(read_per_level(j, "transformer_layers_per_block",
                                    c.transformer_layers_per_block, levels, src));
  TP_RETURN_IF_ERROR(read_per_level(j, "attention_head_dim", c.heads, levels, src));
  TP_RETURN_IF_ERROR(read_per_level(j, "cross_attention_dim", c.cross_attention_dim, levels, src));
  if (j.contains("num_attention_heads") && !j.at("num_attention_heads").is_null())
    return Error(src +
                 ": num_attention_heads is set; diffusers refuses it for UNet2DConditionModel "
                 "(the heads are attention_head_dim)");
  TP_RETURN_IF_ERROR(read_field(j, "downsample_padding", c.downsample_padding, src));
  TP_RETURN_IF_ERROR(read_field(j, "mid_block_scale_factor", c.mid_block_scale_factor, src));
  TP_RETURN_IF_ERROR(read_field(j, "norm_num_groups", c.norm_num_groups, src));
  TP_RETURN_IF_ERROR(read_field(j, "norm_eps", c.norm_eps, src));
  TP_RETURN_IF_ERROR(read_field(j, "use_linear_projection", c.use_linear_projection, src));
  TP_RETURN_IF_ERROR(read_field(j, "addition_time_embed_dim", c.addition_time_embed_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "projection_class_embeddings_input_dim",
                                c.projection_class_embeddings_input_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "time_embedding_dim", c.time_embed_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "conv_in_kernel", c.conv_in_kernel, src));
  TP_RETURN_IF_ERROR(read_field(j, "conv_out_kernel", c.conv_out_kernel, src));
  if (auto it = j.find("sample_size"); it != j.end() && it->is_array() && !it->empty())
    c.sample_size = (*it)[0].is_number_integer() ? (*it)[0].get<int>() : 0;
  else
    TP_RETURN_IF_ERROR(read_field(j, "sample_size", c.sample_size, src));
  if (auto it = j.find("addition_embed_type"); it != j.end() && !it->is_null()) {
    if (*it != "text_time")
      return Error(src + ": addition_embed_type " + it->dump() +
                   " is not supported; twinpath builds text_time (SDXL) or none");
    c.text_time = true;
    if (c.addition_time_embed_dim <= 0 || c.projection_class_embeddings_input_dim <= 0)
      return Error(src +
                   ": text_time needs addition_time_embed_dim and "
                   "projection_class_embeddings_input_dim");
  }
  // What SD and SDXL leave at diffusers' defaults, and twinpath builds only so.
  TP_RETURN_IF_ERROR(expect_value<std::string>(j, "act_fn", "silu", src, "silu"));
  TP_RETURN_IF_ERROR(expect_value<std::string>(j, "resnet_time_scale_shift", "default", src,
                                               "\"default\" (the time embedding added)"));
  TP_RETURN_IF_ERROR(expect_value<std::string>(j, "time_embedding_type", "positional", src,
                                               "positional time embeddings"));
  TP_RETURN_IF_ERROR(
      expect_value<std::string>(j, "attention_type", "default", src, "default attention"));
  TP_RETURN_IF_ERROR(expect_value(j, "only_cross_attention", false, src, "self-attention too"));
  TP_RETURN_IF_ERROR(expect_value(j, "dual_cross_attention", false, src, "one cross-attention"));
  TP_RETURN_IF_ERROR(expect_value(j, "resnet_skip_time_act", false, src, "SiLU on the time"));
  TP_RETURN_IF_ERROR(expect_value(j, "resnet_out_scale_factor", 1.0, src, "an output scale of 1"));
  TP_RETURN_IF_ERROR(expect_value(j, "class_embeddings_concat", false, src, "no class embedding"));
  for (const char* key :
       {"class_embed_type", "encoder_hid_dim", "time_cond_proj_dim", "timestep_post_act",
        "time_embedding_act_fn", "cross_attention_norm", "reverse_transformer_layers_per_block"})
    if (j.contains(key) && !j.at(key).is_null())
      return Error(src + ": " + key + " " + json_excerpt(j.at(key)) +
                   " is not supported; twinpath builds SD 1.5 and SDXL UNets, which leave it null");
  // Shapes diffusers itself would fail on, refused here with the reason.
  if (levels > kMaxLevels || c.norm_num_groups < 1)
    return Error(src + ": block_out_channels lists " + std::to_string(levels) +
                 " levels and norm_num_groups is " + std::to_string(c.norm_num_groups) +
                 "; twinpath builds up to " + std::to_string(kMaxLevels) +
                 " levels, with at least one group");
  for (std::size_t i = 0; i < levels; ++i)
    if (c.layers_per_block[i] > kMaxLayersPerBlock ||
        c.transformer_layers_per_block[i] > kMaxLayersPerBlock)
      return Error(src + ": layers_per_block and transformer_layers_per_block must be at most " +
                   std::to_string(kMaxLayersPerBlock));
  const int c0 = c.block_out_channels[0];
  if (c.time_embed_dim == 0) c.time_embed_dim = 4 * c0;
  for (std::size_t i = 0; i < levels; ++i) {
    const int ch = c.block_out_channels[i];
    if (ch <= 0 || ch % c.norm_num_groups)
      return Error(src + ": block_out_channels entry " + std::to_string(ch) +
                   " is not a positive multiple of norm_num_groups " +
                   std::to_string(c.norm_num_groups));
    if (c.heads[i] <= 0 || ch % c.heads[i])
      return Error(src + ": attention_head_dim (the heads) " + std::to_string(c.heads[i]) +
                   " does not divide block_out_channels " + std::to_string(ch));
    if (c.layers_per_block[i] < 1 || c.transformer_layers_per_block[i] < 0 ||
        c.cross_attention_dim[i] < 1)
      return Error(src +
                   ": layers_per_block must be positive, transformer_layers_per_block not "
                   "negative, cross_attention_dim positive");
  }
  if (c0 % 2 || c.in_channels < 1 || c.out_channels < 1)
    return Error(src + ": block_out_channels[0] (the timestep sinusoid's width) must be even");
  if (c.conv_in_kernel % 2 == 0 || c.conv_out_kernel % 2 == 0)
    return Error(src + ": conv_in_kernel and conv_out_kernel must be odd");
  return c;
}

}  // namespace tp
