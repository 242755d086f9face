// AutoencoderTiny's random valid configs. diffusers' rules: encoder_block_out_channels and
// num_encoder_blocks (and the decoder's pair) list one entry per level, the same number of
// levels on both sides, and the blocks of one side connect without a channel change, so its
// widths are all equal. The draw makes one to four levels, widths from 4 to 24 (odd ones
// included) apart for encoder and decoder, zero to two blocks per level, and latent channels,
// magnitude and shift off TAESD's.
#include "harness/models/config_space.h"

#include <nlohmann/json.hpp>

#include "harness/models/autoencoder_tiny/tiny_config.h"

namespace tp {

const ConfigSpace& autoencoder_tiny_config_space() {
  static const ConfigSpace space{
      "autoencoder_tiny",
      {
          {"encoder_block_out_channels", "1 to 4 levels, all one width from 4 to 24"},
          {"decoder_block_out_channels", "as many levels, all one width from 4 to 24"},
          {"num_encoder_blocks", "0 to 2 per level"},
          {"num_decoder_blocks", "0 to 2 per level"},
          {"latent_channels", "1 to 6"},
          {"latent_magnitude", "1, 3 or 5"},
          {"latent_shift", "0.25 or 0.5"},
      },
      [](ConfigDraw& d) {
        const std::size_t levels = std::size_t(d.integer(1, 4));
        const int encoder_width = d.integer(4, 24), decoder_width = d.integer(4, 24);
        return nlohmann::json{
            {"_class_name", "AutoencoderTiny"},
            {"act_fn", "relu"},
            {"upsample_fn", "nearest"},
            {"upsampling_scaling_factor", 2},
            {"in_channels", 3},
            {"out_channels", 3},
            {"encoder_block_out_channels", std::vector<int>(levels, encoder_width)},
            {"decoder_block_out_channels", std::vector<int>(levels, decoder_width)},
            {"num_encoder_blocks", d.integers(levels, 0, 2)},
            {"num_decoder_blocks", d.integers(levels, 0, 2)},
            {"latent_channels", d.integer(1, 6)},
            {"latent_magnitude", d.pick({1.0, 3.0, 5.0})},
            {"latent_shift", d.pick({0.25, 0.5})},
            {"scaling_factor", 1.0},
            {"shift_factor", 0.0},
        };
      }};
  return space;
}

}  // namespace tp
