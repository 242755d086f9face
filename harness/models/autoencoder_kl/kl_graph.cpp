// Ports diffusers AutoencoderKL (models/autoencoders/autoencoder_kl.py, vae.py Encoder/Decoder,
// resnet.py ResnetBlock2D, unet_2d_blocks.py UNetMidBlock2D, attention_processor.py Attention).
#include <cmath>

#include "harness/models/autoencoder_kl/kl_config.h"

namespace tp {
namespace {

constexpr double kResnetEps = 1e-6;  // every GroupNorm in the VAE

class KlBuilder {
 public:
  KlBuilder(const KlConfig& c, const char* graph_name) : c_(c), b_(graph_name) {}

  // ResnetBlock2D with temb=None and output_scale_factor=1.
  int resnet(const std::string& p, int x, int cin, int cout) {
    int h = b_.group_norm(p + ".norm1", x, cin, c_.norm_num_groups, kResnetEps);
    h = b_.unary(p + ".act1", OpKind::kSilu, h);
    h = b_.conv2d_same(p + ".conv1", h, cin, cout, 3);  // [B,cout,H,W]
    h = b_.group_norm(p + ".norm2", h, cout, c_.norm_num_groups, kResnetEps);
    h = b_.unary(p + ".act2", OpKind::kSilu, h);
    h = b_.conv2d_same(p + ".conv2", h, cout, cout, 3);
    const int shortcut = cin != cout ? b_.conv2d_same(p + ".conv_shortcut", x, cin, cout, 1) : x;
    const int out = b_.add(p + ".add", shortcut, h);
    b_.module(p, out);
    return out;
  }

  // Attention(heads=1, dim_head=C, residual_connection=True, rescale_output_factor=1), as
  // AttnProcessor2_0 runs it: the normed image as [B, H*W, C] tokens, projections, one-head
  // attention, to_out, back to [B,C,H,W], plus the input.
  int attention(const std::string& p, int x, int c) {
    const int n = b_.group_norm(p + ".group_norm", x, c, c_.norm_num_groups, kResnetEps);
    const int t = b_.to_tokens(p + ".to_tokens", n, c);
    const int q = b_.linear_last(p + ".to_q", t, c, c);
    const int k = b_.linear_last(p + ".to_k", t, c, c);
    const int v = b_.linear_last(p + ".to_v", t, c, c);
    const int a = b_.multi_head_attention(p + ".sdpa", q, k, v, 1, 1.0 / std::sqrt(double(c)));
    const int o = b_.linear_last(p + ".to_out.0", a, c, c);
    const int out = b_.add(p + ".add", b_.to_image(p + ".to_image", o, x), x);
    b_.module(p, out);
    return out;
  }

  int mid_block(const std::string& p, int x, int c) {
    int h = resnet(p + ".resnets.0", x, c, c);
    if (c_.mid_block_add_attention) h = attention(p + ".attentions.0", h, c);
    h = resnet(p + ".resnets.1", h, c, c);
    b_.module(p, h);
    return h;
  }

  const KlConfig& c_;
  GraphBuilder b_;
};

}  // namespace

namespace {

Graph kl_encoder(const KlConfig& c, bool moments_only) {
  KlBuilder k(c, moments_only ? "vae.encoder_moments" : "vae.encoder");
  GraphBuilder& b = k.b_;
  const auto& boc = c.block_out_channels;
  int h = b.input("sample");
  h = b.conv2d_same("encoder.conv_in", h, c.in_channels, boc[0], 3);
  int prev = boc[0];
  for (std::size_t i = 0; i < boc.size(); ++i) {
    const std::string block = "encoder.down_blocks." + std::to_string(i);
    for (int j = 0; j < c.layers_per_block; ++j)
      h = k.resnet(block + ".resnets." + std::to_string(j), h, j == 0 ? prev : boc[i], boc[i]);
    if (i + 1 != boc.size()) {
      // Downsample2D(padding=0): F.pad(x, (0, 1, 0, 1)) then a 3x3 stride-2 conv.
      h = b.conv2d(block + ".downsamplers.0.conv", h, boc[i], boc[i], 3, 2, 0, 1, 0, 1, true);
      b.module(block + ".downsamplers.0", h);
    }
    b.module(block, h);
    prev = boc[i];
  }
  const int top = boc.back();
  h = k.mid_block("encoder.mid_block", h, top);
  h = b.group_norm("encoder.conv_norm_out", h, top, c.norm_num_groups, kResnetEps);
  h = b.unary("encoder.conv_act", OpKind::kSilu, h);
  h = b.conv2d_same("encoder.conv_out", h, top, 2 * c.latent_channels, 3);  // double_z
  b.module("encoder", h);
  if (c.use_quant_conv)
    h = b.conv2d_same("quant_conv", h, 2 * c.latent_channels, 2 * c.latent_channels, 1);
  if (moments_only) {
    b.output("moments", h);
    return b.finish();
  }
  // DiagonalGaussianDistribution: mean, logvar = chunk(moments, 2); logvar clamped.
  const int mean = b.slice_channels("posterior.mean", h, 0, c.latent_channels);
  const int raw =
      b.slice_channels("posterior.logvar_unclamped", h, c.latent_channels, 2 * c.latent_channels);
  const int logvar = b.clamp("posterior.logvar", raw, -30.0, 20.0);
  b.output("mean", mean);
  b.output("logvar", logvar);
  return b.finish();
}

}  // namespace

Graph build_kl_encoder_graph(const KlConfig& c) { return kl_encoder(c, false); }
Graph build_kl_moments_graph(const KlConfig& c) { return kl_encoder(c, true); }

Graph build_kl_decoder_graph(const KlConfig& c) {
  KlBuilder k(c, "vae.decoder");
  GraphBuilder& b = k.b_;
  const int lat = c.latent_channels;
  int h = b.input("latents");
  if (c.use_post_quant_conv) h = b.conv2d_same("post_quant_conv", h, lat, lat, 1);
  std::vector<int> rev(c.block_out_channels.rbegin(), c.block_out_channels.rend());
  h = b.conv2d_same("decoder.conv_in", h, lat, rev[0], 3);
  h = k.mid_block("decoder.mid_block", h, rev[0]);
  int prev = rev[0];
  for (std::size_t i = 0; i < rev.size(); ++i) {
    const std::string block = "decoder.up_blocks." + std::to_string(i);
    for (int j = 0; j <= c.layers_per_block; ++j)  // layers_per_block + 1 resnets
      h = k.resnet(block + ".resnets." + std::to_string(j), h, j == 0 ? prev : rev[i], rev[i]);
    if (i + 1 != rev.size()) {
      // Upsample2D: F.interpolate(scale_factor=2, mode="nearest") then a 3x3 conv.
      h = b.upsample_nearest2x(block + ".upsamplers.0.interpolate", h);
      h = b.conv2d_same(block + ".upsamplers.0.conv", h, rev[i], rev[i], 3);
      b.module(block + ".upsamplers.0", h);
    }
    b.module(block, h);
    prev = rev[i];
  }
  const int bottom = c.block_out_channels[0];
  h = b.group_norm("decoder.conv_norm_out", h, bottom, c.norm_num_groups, kResnetEps);
  h = b.unary("decoder.conv_act", OpKind::kSilu, h);
  h = b.conv2d_same("decoder.conv_out", h, bottom, c.out_channels, 3);
  b.module("decoder", h);
  b.output("sample", h);
  return b.finish();
}

}  // namespace tp
