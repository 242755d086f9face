// config.json of diffusers' AutoencoderKL, with the constructor defaults for every field the
// file omits (vae-facts.md 1.1), and its graphs (kl_graph.cpp).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/status.h"
#include "harness/models/vae/vae_config.h"

namespace tp {

struct KlConfig {
  int in_channels = 3;
  int out_channels = 3;
  std::vector<int> block_out_channels{64};
  int layers_per_block = 1;
  int latent_channels = 4;
  int norm_num_groups = 32;
  int sample_size = 32;  // first entry when the file gives a list
  double scaling_factor = 0.18215;
  std::optional<double> shift_factor;
  bool force_upcast = true;
  bool use_quant_conv = true;
  bool use_post_quant_conv = true;
  bool mid_block_add_attention = true;

  int downscale() const { return 1 << (int(block_out_channels.size()) - 1); }
};

// encoder: "sample" [B,3,H,W] in [-1,1] -> "mean", "logvar" (clamped to [-30, 20], as
// DiagonalGaussianDistribution); decoder: "latents" [B,L,h,w] -> "sample".
Graph build_kl_encoder_graph(const KlConfig& config);
// The encoder up to the 2L-channel moments (quant_conv's output), before the posterior's chunk
// and clamp: what tiled encode blends.
Graph build_kl_moments_graph(const KlConfig& config);
Graph build_kl_decoder_graph(const KlConfig& config);

struct KlVaeConfig : VaeConfig {
  KlConfig kl;

  const char* class_name() const override { return "AutoencoderKL"; }
  int latent_channels() const override { return kl.latent_channels; }
  int image_channels() const override { return kl.in_channels; }
  int downscale() const override { return kl.downscale(); }
  std::optional<double> scaling_factor() const override { return kl.scaling_factor; }
  Graph encoder_graph() const override { return build_kl_encoder_graph(kl); }
  Graph decoder_graph() const override { return build_kl_decoder_graph(kl); }
  Graph moments_graph() const override { return build_kl_moments_graph(kl); }
  VaeTilingStyle tiling_style() const override {
    return {false, int64_t(kl.downscale()), kl.sample_size};
  }
};

// Random valid configs (config_space.cpp).
const ConfigSpace& autoencoder_kl_config_space();

// A config.json object; `source` names the file in error messages.
Expected<std::shared_ptr<VaeConfig>> parse_kl_config(const nlohmann::json& json,
                                                     const std::string& source);

}  // namespace tp
