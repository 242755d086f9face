#include "harness/models/autoencoder_tiny/family.h"

#include <nlohmann/json.hpp>

#include "harness/models/autoencoder_tiny/tiny_config.h"
#include "harness/models/vae/vae_family.h"

namespace tp {
namespace {

VaeArchitecture autoencoder_tiny() {
  VaeArchitecture a;
  a.class_name = "AutoencoderTiny";
  a.claims_unnamed = [](const nlohmann::json& j) {
    return j.contains("encoder_block_out_channels");
  };
  a.parse = parse_tiny_config;
  a.config_space = &autoencoder_tiny_config_space();
  a.encoder_outputs = {"latents"};
  return a;
}

}  // namespace

const Family& autoencoder_tiny_family() {
  // tiny-taesd: a small model of TAESD's architecture, for fast CI.
  static const VaeFamily family(
      autoencoder_tiny(), {
                              {"tiny-taesd", R"({"_class_name": "AutoencoderTiny", "act_fn": "relu",
 "encoder_block_out_channels": [16, 16, 16, 16], "decoder_block_out_channels": [16, 16, 16, 16],
 "num_encoder_blocks": [1, 1, 1, 1], "num_decoder_blocks": [1, 1, 1, 1],
 "in_channels": 3, "out_channels": 3, "latent_channels": 4, "latent_magnitude": 3, "latent_shift": 0.5,
 "scaling_factor": 1.0, "shift_factor": 0.0, "upsample_fn": "nearest", "upsampling_scaling_factor": 2})"},
                          });
  return family;
}

}  // namespace tp
