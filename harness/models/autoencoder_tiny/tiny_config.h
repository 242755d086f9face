// config.json of diffusers' AutoencoderTiny, with the constructor defaults for every field the
// file omits (vae-facts.md 5.2), and its graphs (tiny_graph.cpp).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/status.h"
#include "harness/models/vae/vae_config.h"

namespace tp {

struct TinyConfig {
  int in_channels = 3;
  int out_channels = 3;
  std::vector<int> encoder_block_out_channels{64, 64, 64, 64};
  std::vector<int> decoder_block_out_channels{64, 64, 64, 64};
  std::vector<int> num_encoder_blocks{1, 3, 3, 3};
  std::vector<int> num_decoder_blocks{3, 3, 3, 1};
  int latent_channels = 4;
  double latent_magnitude = 3;
  double latent_shift = 0.5;
  double scaling_factor = 1.0;
  double shift_factor = 0.0;

  int downscale() const { return 1 << (int(num_encoder_blocks.size()) - 1); }
};

// encoder: "sample" [B,3,H,W] in [-1,1] -> "latents"; decoder: "latents" -> "sample".
Graph build_tiny_encoder_graph(const TinyConfig& config);
Graph build_tiny_decoder_graph(const TinyConfig& config);

struct TinyVaeConfig : VaeConfig {
  TinyConfig tiny;

  const char* class_name() const override { return "AutoencoderTiny"; }
  int latent_channels() const override { return tiny.latent_channels; }
  int image_channels() const override { return tiny.in_channels; }
  int downscale() const override { return tiny.downscale(); }
  std::optional<double> scaling_factor() const override { return tiny.scaling_factor; }
  Graph encoder_graph() const override { return build_tiny_encoder_graph(tiny); }
  Graph decoder_graph() const override { return build_tiny_decoder_graph(tiny); }
  Graph moments_graph() const override { return encoder_graph(); }  // masks: not blended
  // diffusers: spatial_scale_factor = 2**out_channels (not the encoder's downscale); tiles of
  // 512 pixels by default.
  VaeTilingStyle tiling_style() const override {
    return {true, int64_t(1) << tiny.out_channels, 512};
  }
};

// Random valid configs (config_space.cpp).
const ConfigSpace& autoencoder_tiny_config_space();

// A config.json object; `source` names the file in error messages.
Expected<std::shared_ptr<VaeConfig>> parse_tiny_config(const nlohmann::json& json,
                                                       const std::string& source);

}  // namespace tp
