#include "harness/models/autoencoder_tiny/family.h"

#include "harness/models/vae/vae_family.h"

namespace tp {

const Family& autoencoder_tiny_family() {
  // tiny-taesd: a small model of TAESD's architecture, for fast CI.
  static const VaeFamily family(
      VaeConfig::Kind::kTiny,
      {
          {"tiny-taesd", R"({"_class_name": "AutoencoderTiny", "act_fn": "relu",
 "encoder_block_out_channels": [16, 16, 16, 16], "decoder_block_out_channels": [16, 16, 16, 16],
 "num_encoder_blocks": [1, 1, 1, 1], "num_decoder_blocks": [1, 1, 1, 1],
 "in_channels": 3, "out_channels": 3, "latent_channels": 4, "latent_magnitude": 3, "latent_shift": 0.5,
 "scaling_factor": 1.0, "shift_factor": 0.0, "upsample_fn": "nearest", "upsampling_scaling_factor": 2})"},
      });
  return family;
}

}  // namespace tp
