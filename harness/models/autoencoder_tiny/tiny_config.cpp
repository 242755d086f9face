#include "harness/models/autoencoder_tiny/tiny_config.h"

#include <nlohmann/json.hpp>

#include "harness/core/json_config.h"

namespace tp {
namespace {

using nlohmann::json;

Expected<TinyConfig> parse_tiny(const json& j, const std::string& src) {
  TinyConfig c;
  TP_RETURN_IF_ERROR(read_field(j, "in_channels", c.in_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "out_channels", c.out_channels, src));
  TP_RETURN_IF_ERROR(
      read_field(j, "encoder_block_out_channels", c.encoder_block_out_channels, src));
  TP_RETURN_IF_ERROR(
      read_field(j, "decoder_block_out_channels", c.decoder_block_out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "num_encoder_blocks", c.num_encoder_blocks, src));
  TP_RETURN_IF_ERROR(read_field(j, "num_decoder_blocks", c.num_decoder_blocks, src));
  TP_RETURN_IF_ERROR(read_field(j, "latent_channels", c.latent_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "latent_magnitude", c.latent_magnitude, src));
  TP_RETURN_IF_ERROR(read_field(j, "latent_shift", c.latent_shift, src));
  TP_RETURN_IF_ERROR(read_field(j, "scaling_factor", c.scaling_factor, src));
  TP_RETURN_IF_ERROR(read_field(j, "shift_factor", c.shift_factor, src));
  std::string act = "relu", upsample = "nearest";
  int factor = 2;
  TP_RETURN_IF_ERROR(read_field(j, "act_fn", act, src));
  TP_RETURN_IF_ERROR(read_field(j, "upsample_fn", upsample, src));
  TP_RETURN_IF_ERROR(read_field(j, "upsampling_scaling_factor", factor, src));
  if (act != "relu" || upsample != "nearest" || factor != 2)
    return Error(src +
                 ": twinpath builds AutoencoderTiny with act_fn relu, upsample_fn nearest and "
                 "upsampling_scaling_factor 2 (as TAESD); this file asks for " +
                 act + ", " + upsample + ", " + std::to_string(factor));
  if (c.encoder_block_out_channels.size() != c.num_encoder_blocks.size() ||
      c.decoder_block_out_channels.size() != c.num_decoder_blocks.size() ||
      c.num_encoder_blocks.empty() || c.num_encoder_blocks.size() != c.num_decoder_blocks.size())
    return Error(src +
                 ": encoder/decoder block_out_channels and num_*_blocks must have one equal, "
                 "non-zero length");
  if (c.num_encoder_blocks.size() > kMaxLevels)
    return Error(src + ": num_encoder_blocks lists " + std::to_string(c.num_encoder_blocks.size()) +
                 " levels; twinpath builds up to " + std::to_string(kMaxLevels));
  for (const auto* list : {&c.num_encoder_blocks, &c.num_decoder_blocks})
    for (int n : *list)
      if (n < 0 || n > kMaxLayersPerBlock)
        return Error(src + ": num_encoder_blocks and num_decoder_blocks entries must be 0 to " +
                     std::to_string(kMaxLayersPerBlock) + ", not " + std::to_string(n));
  // diffusers' EncoderTiny/DecoderTiny connect block i to block i+1 without a channel change,
  // so unequal widths cannot run there either.
  for (const auto* list : {&c.encoder_block_out_channels, &c.decoder_block_out_channels})
    for (int ch : *list)
      if (ch != list->front() || ch <= 0)
        return Error(src +
                     ": AutoencoderTiny block_out_channels must all be equal and positive "
                     "(diffusers cannot run unequal ones)");
  return c;
}

}  // namespace

Expected<std::shared_ptr<VaeConfig>> parse_tiny_config(const json& j, const std::string& source) {
  auto c = std::make_shared<TinyVaeConfig>();
  TP_ASSIGN_OR_RETURN(c->tiny, parse_tiny(j, source));
  return std::shared_ptr<VaeConfig>(std::move(c));
}

}  // namespace tp
