// config.json of diffusers' AutoencoderKLHunyuanVideo (HunyuanVideo's causal 3-D VAE), with the
// constructor's defaults for every field the file omits (video-vae-facts 1.1). What diffusers
// itself refuses (another block type, a temporal ratio its decoder has no rule for) is refused
// naming the field.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/status.h"
#include "harness/models/family.h"

namespace tp {

struct HunyuanVideoVaeConfig : ModelConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 16;
  std::vector<int> block_out_channels = {128, 256, 512, 512};
  int layers_per_block = 2;
  int norm_num_groups = 32;
  double scaling = 0.476986;  // config.json's scaling_factor
  int spatial_compression_ratio = 8;
  int temporal_compression_ratio = 4;
  bool mid_block_add_attention = true;

  int levels() const { return int(block_out_channels.size()); }
  // Level i's (down block's, or up block's) resampling: in space for the first log2(spatial)
  // levels, in time from level levels - 1 - log2(temporal) on, never at the last level.
  bool resamples_space(int i) const;
  bool resamples_time(int i) const;
  // Frames: 1 + 4k video frames make 1 + k latent frames and back (video-vae-facts 5.1).
  int64_t latent_frames(int64_t video_frames) const;
  int64_t video_frames(int64_t latent_frames) const;
  const Family& family() const override;
  std::optional<double> scaling_factor() const override { return scaling; }
};

// `source` names the file in error messages.
Expected<HunyuanVideoVaeConfig> parse_hunyuan_video_vae_config(const nlohmann::json& json,
                                                               const std::string& source);

// The space `model=random:autoencoder_kl_hunyuan_video:SEED` draws from (config_space.cpp).
struct ConfigSpace;
const ConfigSpace& autoencoder_kl_hunyuan_video_config_space();

// The graphs: "video.encoder" (sample [B,C,T,H,W] -> mean, logvar: the posterior's, logvar
// clamped as DiagonalGaussianDistribution does) and "video.decoder" (latents -> sample, through
// post_quant_conv), untiled and not framewise.
Graph build_hunyuan_video_encoder_graph(const HunyuanVideoVaeConfig& config);
Graph build_hunyuan_video_decoder_graph(const HunyuanVideoVaeConfig& config);
// "video.encoder_moments": the encoder up to quant_conv (output "moments", 2L channels), what a
// tiled encode blends before the posterior's chunk and clamp.
Graph build_hunyuan_video_moments_graph(const HunyuanVideoVaeConfig& config);

}  // namespace tp
