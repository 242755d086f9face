#include "harness/models/autoencoder_kl/family.h"

#include <nlohmann/json.hpp>

#include "harness/models/autoencoder_kl/kl_config.h"
#include "harness/models/vae/vae_family.h"

namespace tp {
namespace {

VaeArchitecture autoencoder_kl() {
  VaeArchitecture a;
  a.class_name = "AutoencoderKL";
  a.claims_unnamed = [](const nlohmann::json& j) {  // AutoencoderTiny's fields are not there
    return !j.contains("encoder_block_out_channels");
  };
  a.parse = parse_kl_config;
  a.config_space = &autoencoder_kl_config_space();
  a.encoder_outputs = {"mean", "logvar"};  // the posterior's
  return a;
}

}  // namespace

const Family& autoencoder_kl_family() {
  // tiny-kl: a small model of the architecture, for fast CI. sd-kl:
  // runwayml/stable-diffusion-v1-5 vae/config.json. sdxl-kl: SDXL base 1.0 vae/config.json.
  static const VaeFamily family(
      autoencoder_kl(),
      {
          {"tiny-kl", R"({"_class_name": "AutoencoderKL", "act_fn": "silu",
 "block_out_channels": [16, 32, 32], "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
 "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"],
 "in_channels": 3, "out_channels": 3, "latent_channels": 4, "layers_per_block": 1,
 "norm_num_groups": 8, "sample_size": 32, "scaling_factor": 0.18215})"},
          {"sd-kl",
           R"({"_class_name": "AutoencoderKL", "_diffusers_version": "0.6.0", "act_fn": "silu",
 "block_out_channels": [128, 256, 512, 512],
 "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
 "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"],
 "in_channels": 3, "out_channels": 3, "latent_channels": 4, "layers_per_block": 2,
 "norm_num_groups": 32, "sample_size": 512, "scaling_factor": 0.18215})"},
          {"sdxl-kl",
           R"({"_class_name": "AutoencoderKL", "_diffusers_version": "0.20.0.dev0", "act_fn": "silu",
 "block_out_channels": [128, 256, 512, 512],
 "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
 "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"],
 "in_channels": 3, "out_channels": 3, "latent_channels": 4, "layers_per_block": 2,
 "norm_num_groups": 32, "sample_size": 1024, "scaling_factor": 0.13025, "force_upcast": true})"},
      });
  return family;
}

}  // namespace tp
