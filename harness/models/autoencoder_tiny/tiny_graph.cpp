// Ports diffusers AutoencoderTiny (models/autoencoders/autoencoder_tiny.py, vae.py EncoderTiny,
// DecoderTiny, unet_2d_blocks.py AutoencoderTinyBlock), itself a port of madebyollin/taesd.
#include "harness/models/autoencoder_tiny/tiny_config.h"

namespace tp {
namespace {

// AutoencoderTinyBlock(C, C): fuse(conv(x) + skip(x)), conv = Sequential(conv3x3, act,
// conv3x3, act, conv3x3); skip is Identity because in == out.
int tiny_block(GraphBuilder& b, const std::string& p, int x, int c) {
  int h = b.conv2d_same(p + ".conv.0", x, c, c, 3);
  h = b.unary(p + ".conv.1", OpKind::kRelu, h);
  h = b.conv2d_same(p + ".conv.2", h, c, c, 3);
  h = b.unary(p + ".conv.3", OpKind::kRelu, h);
  h = b.conv2d_same(p + ".conv.4", h, c, c, 3);
  h = b.add(p + ".add", h, x);
  h = b.unary(p + ".fuse", OpKind::kRelu, h);
  b.module(p, h);
  return h;
}

std::string layer(const char* part, int index) {
  return std::string(part) + ".layers." + std::to_string(index);
}

}  // namespace

Graph build_tiny_encoder_graph(const TinyConfig& c) {
  GraphBuilder b("vae.encoder");
  int h = b.input("sample");
  OpAttrs to_unit;  // EncoderTiny.forward: x.add(1).div(2), [-1,1] -> [0,1]
  to_unit.scale = 0.5;
  to_unit.shift = 0.5;
  h = b.unary("encoder.to_unit_range", OpKind::kAffine, h, to_unit);
  int idx = 0;
  for (std::size_t i = 0; i < c.num_encoder_blocks.size(); ++i) {
    const int ch = c.encoder_block_out_channels[i];
    if (i == 0) {
      h = b.conv2d_same(layer("encoder", idx++), h, c.in_channels, ch, 3);
    } else {  // stride-2, symmetric padding 1, no bias
      h = b.conv2d(layer("encoder", idx++), h, ch, ch, 3, 2, 1, 1, 1, 1, false);
    }
    for (int k = 0; k < c.num_encoder_blocks[i]; ++k) {
      h = tiny_block(b, layer("encoder", idx), h, ch);
      ++idx;
    }
  }
  h = b.conv2d_same(layer("encoder", idx), h, c.encoder_block_out_channels.back(),
                    c.latent_channels, 3);
  b.module("encoder", h);
  b.output("latents", h);
  return b.finish();
}

Graph build_tiny_decoder_graph(const TinyConfig& c) {
  GraphBuilder b("vae.decoder");
  int h = b.input("latents");
  OpAttrs clamp;  // DecoderTiny.forward: torch.tanh(x / 3) * 3
  clamp.scale = 3;
  h = b.unary("decoder.clamp", OpKind::kTanhClamp, h, clamp);
  const int c0 = c.decoder_block_out_channels[0];
  h = b.conv2d_same(layer("decoder", 0), h, c.latent_channels, c0, 3);
  h = b.unary(layer("decoder", 1), OpKind::kRelu, h);
  int idx = 2;
  const std::size_t stages = c.num_decoder_blocks.size();
  for (std::size_t i = 0; i < stages; ++i) {
    const int ch = c.decoder_block_out_channels[i];
    const bool final = i + 1 == stages;
    for (int k = 0; k < c.num_decoder_blocks[i]; ++k) {
      h = tiny_block(b, layer("decoder", idx), h, ch);
      ++idx;
    }
    if (!final) h = b.upsample_nearest2x(layer("decoder", idx++), h);
    h = b.conv2d_same(layer("decoder", idx++), h, ch, final ? c.out_channels : ch, 3,
                      /*bias=*/final);
  }
  OpAttrs to_signed;  // x.mul(2).sub(1), [0,1] -> [-1,1]
  to_signed.scale = 2;
  to_signed.shift = -1;
  h = b.unary("decoder.to_signed_range", OpKind::kAffine, h, to_signed);
  b.module("decoder", h);
  b.output("sample", h);
  return b.finish();
}

}  // namespace tp
