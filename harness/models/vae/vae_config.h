// config.json of diffusers' AutoencoderKL and AutoencoderTiny, with the constructor defaults
// for every field the file omits (vae-facts.md 1.1 and 5.2).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/status.h"
#include "harness/models/family.h"

namespace tp {

struct KlConfig {  // diffusers AutoencoderKL
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

struct TinyConfig {  // diffusers AutoencoderTiny
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

struct VaeConfig : ModelConfig {
  enum class Kind { kKl, kTiny };
  Kind kind = Kind::kKl;
  KlConfig kl;
  TinyConfig tiny;

  const char* class_name() const { return kind == Kind::kKl ? "AutoencoderKL" : "AutoencoderTiny"; }
  int latent_channels() const {
    return kind == Kind::kKl ? kl.latent_channels : tiny.latent_channels;
  }
  int image_channels() const { return kind == Kind::kKl ? kl.in_channels : tiny.in_channels; }
  int downscale() const { return kind == Kind::kKl ? kl.downscale() : tiny.downscale(); }
  std::optional<double> scaling_factor() const override {
    return kind == Kind::kKl ? kl.scaling_factor : tiny.scaling_factor;
  }
  // The family that parsed it (VaeFamily::parse_config), so this folder names neither family.
  const Family* owner = nullptr;
  const Family& family() const override;
};

// The VAE config of a model of either VAE family (a model of another family is a bug here).
const VaeConfig& vae_config(const Model& model);

// `source` names the file in error messages. The class is _class_name, or without it the
// fields (AutoencoderTiny has encoder_block_out_channels).
Expected<VaeConfig> parse_vae_config(const nlohmann::json& json, const std::string& source);

}  // namespace tp
