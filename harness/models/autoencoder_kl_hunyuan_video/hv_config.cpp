#include "harness/models/autoencoder_kl_hunyuan_video/hv_config.h"

#include "harness/core/json_config.h"

namespace tp {
namespace {

using nlohmann::json;

int log2_exact(int v) {
  int n = 0;
  while (v > 1 && v % 2 == 0) v /= 2, ++n;
  return v == 1 ? n : -1;
}

Status check_block_types(const json& j, const char* key, const char* type, std::size_t levels,
                         const std::string& src) {
  std::vector<std::string> types(levels, type);
  TP_RETURN_IF_ERROR(read_field(j, key, types, src));
  if (types.size() != levels)
    return Error(src + ": " + key + " lists " + std::to_string(types.size()) +
                 " blocks, block_out_channels " + std::to_string(levels) + "; give one per level");
  for (const std::string& t : types)
    if (t != type)
      return Error(src + ": " + key + " holds " + t + "; AutoencoderKLHunyuanVideo builds " + type +
                   " only (diffusers raises on any other)");
  return Status();
}

Status check_sizes(const HunyuanVideoVaeConfig& c, const std::string& src) {
  if (c.block_out_channels.empty() || c.block_out_channels.size() > kMaxLevels)
    return Error(src + ": block_out_channels must list 1 to " + std::to_string(kMaxLevels) +
                 " levels");
  for (int ch : c.block_out_channels)
    if (ch < 1 || c.norm_num_groups < 1 || ch % c.norm_num_groups)
      return Error(src + ": block_out_channels " + std::to_string(ch) +
                   " is not a positive multiple of norm_num_groups " +
                   std::to_string(c.norm_num_groups) + " (GroupNorm splits channels evenly)");
  if (c.layers_per_block < 1 || c.layers_per_block > kMaxLayersPerBlock)
    return Error(src + ": layers_per_block must be 1 to " + std::to_string(kMaxLayersPerBlock));
  for (int v : {c.in_channels, c.out_channels, c.latent_channels})
    if (v < 1) return Error(src + ": in_channels, out_channels and latent_channels must be >= 1");
  if (c.temporal_compression_ratio != 4)
    return Error(src + ": temporal_compression_ratio " +
                 std::to_string(c.temporal_compression_ratio) +
                 " has no decoder in diffusers (it raises for anything but 4); use 4");
  const int sp = log2_exact(c.spatial_compression_ratio);
  if (sp < 0 || sp > c.levels())
    return Error(src + ": spatial_compression_ratio " +
                 std::to_string(c.spatial_compression_ratio) + " must be 2^k with k at most " +
                 "the number of levels (" + std::to_string(c.levels()) + ")");
  if (c.levels() < 3)  // two time resamplings, neither at the last level
    return Error(src +
                 ": temporal_compression_ratio 4 needs at least 3 levels in "
                 "block_out_channels (diffusers resamples time twice, never at the last)");
  return Status();
}

}  // namespace

bool HunyuanVideoVaeConfig::resamples_space(int i) const {
  return i < log2_exact(spatial_compression_ratio);
}

bool HunyuanVideoVaeConfig::resamples_time(int i) const {
  return i >= levels() - 1 - log2_exact(temporal_compression_ratio) && i != levels() - 1;
}

int64_t HunyuanVideoVaeConfig::latent_frames(int64_t video_frames) const {
  return (video_frames - 1) / temporal_compression_ratio + 1;
}

int64_t HunyuanVideoVaeConfig::video_frames(int64_t latent_frames) const {
  return temporal_compression_ratio * (latent_frames - 1) + 1;
}

Expected<HunyuanVideoVaeConfig> parse_hunyuan_video_vae_config(const json& j,
                                                               const std::string& src) {
  if (!j.is_object()) return Error(src + ": config must be a JSON object");
  HunyuanVideoVaeConfig c;
  TP_RETURN_IF_ERROR(read_field(j, "in_channels", c.in_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "out_channels", c.out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "latent_channels", c.latent_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "block_out_channels", c.block_out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "layers_per_block", c.layers_per_block, src));
  TP_RETURN_IF_ERROR(read_field(j, "norm_num_groups", c.norm_num_groups, src));
  TP_RETURN_IF_ERROR(read_field(j, "scaling_factor", c.scaling, src));
  TP_RETURN_IF_ERROR(read_field(j, "spatial_compression_ratio", c.spatial_compression_ratio, src));
  TP_RETURN_IF_ERROR(
      read_field(j, "temporal_compression_ratio", c.temporal_compression_ratio, src));
  TP_RETURN_IF_ERROR(read_field(j, "mid_block_add_attention", c.mid_block_add_attention, src));
  std::string act = "silu";
  TP_RETURN_IF_ERROR(read_field(j, "act_fn", act, src));
  if (act != "silu" && act != "swish")
    return Error(src + ": act_fn " + act + " is not built; twinpath builds silu (swish)");
  TP_RETURN_IF_ERROR(check_sizes(c, src));
  const std::size_t levels = c.block_out_channels.size();
  TP_RETURN_IF_ERROR(
      check_block_types(j, "down_block_types", "HunyuanVideoDownBlock3D", levels, src));
  TP_RETURN_IF_ERROR(check_block_types(j, "up_block_types", "HunyuanVideoUpBlock3D", levels, src));
  return c;
}

}  // namespace tp
