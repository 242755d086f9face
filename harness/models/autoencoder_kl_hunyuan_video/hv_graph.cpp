// Ports diffusers' AutoencoderKLHunyuanVideo (models/autoencoders/autoencoder_kl_hunyuan_video.py:
// HunyuanVideoCausalConv3d, ResnetBlockCausal3D, Down/UpsampleCausal3D, MidBlock3D, Encoder3D,
// Decoder3D; attention_processor.py Attention as AttnProcessor2_0 runs it) as graphs of the N-d
// ops, untiled and not framewise.
#include <cmath>

#include "harness/models/autoencoder_kl_hunyuan_video/hv_config.h"

namespace tp {
namespace {

constexpr double kEps = 1e-6;  // every GroupNorm in the VAE

class HvBuilder {
 public:
  HvBuilder(const HunyuanVideoVaeConfig& c, const char* graph_name) : c_(c), b_(graph_name) {}

  // HunyuanVideoCausalConv3d: F.pad(replicate) by k//2 in space on both sides and k-1 frames
  // before (none after), then Conv3d without padding; its weights one `.conv` level down.
  int causal_conv(const std::string& p, int x, int cin, int cout, int k,
                  std::vector<int> stride = {1, 1, 1}) {
    const int s = k / 2;
    const int h = b_.conv(p + ".conv", x, cin, cout, {k, k, k}, stride, {1, 1, 1}, {k - 1, s, s},
                          {0, s, s}, PadMode::kReplicate);
    b_.module(p, h);
    return h;
  }

  // ResnetBlockCausal3D: GroupNorm (statistics over every frame), SiLU, causal conv, twice; a 1x1x1
  // causal conv on the shortcut when the channels change.
  int resnet(const std::string& p, int x, int cin, int cout) {
    int h = b_.unary(p + ".nonlinearity", OpKind::kSilu,
                     b_.group_norm(p + ".norm1", x, cin, c_.norm_num_groups, kEps));
    h = causal_conv(p + ".conv1", h, cin, cout, 3);
    h = b_.unary(p + ".nonlinearity_2", OpKind::kSilu,
                 b_.group_norm(p + ".norm2", h, cout, c_.norm_num_groups, kEps));
    h = causal_conv(p + ".conv2", h, cout, cout, 3);
    const int shortcut = cin != cout ? causal_conv(p + ".conv_shortcut", x, cin, cout, 1) : x;
    const int out = b_.add(p + ".add", h, shortcut);
    b_.module(p, out);
    return out;
  }

  // The mid block's Attention (one head of width C, residual): GroupNorm over the tokens of all
  // frames, projections, attention causal per frame (prepare_causal_attention_mask: a token sees
  // its own and earlier frames), to_out, back to [B,C,T,H,W], plus the input.
  int attention(const std::string& p, int x, int c) {
    const int n = b_.group_norm(p + ".group_norm", x, c, c_.norm_num_groups, kEps);
    const int t = b_.to_tokens(p + ".to_tokens", n, c);
    const int q = b_.linear_last(p + ".to_q", t, c, c);
    const int k = b_.linear_last(p + ".to_k", t, c, c);
    const int v = b_.linear_last(p + ".to_v", t, c, c);
    const int a = b_.frame_causal_attention(p + ".sdpa", q, k, v, 1, 1.0 / std::sqrt(double(c)), x);
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

  // UpsampleCausal3D: the first frame doubled in space (at a space-resampling level) alone, the
  // others in time too at a time-resampling level: frames f0, f1, f1, f2, f2, ..., which is the
  // nearest 2x in time (f0, f0, f1, f1, ...) without its first frame; then a causal 3x3x3 conv.
  int upsample(const std::string& p, int x, int c, bool space, bool time) {
    const int64_t s = space ? 2 : 1;
    int h = b_.interpolate_nearest_by(p + ".interpolate", x, {time ? 2 : 1, s, s});
    if (time) h = b_.slice(p + ".drop_first", h, 2, 1, kToEnd);
    return causal_conv(p + ".conv", h, c, c, 3);
  }

  // GroupNorm, SiLU and the causal conv_out.
  int out(const std::string& p, int x, int cin, int cout) {
    const int h = b_.unary(p + ".conv_act", OpKind::kSilu,
                           b_.group_norm(p + ".conv_norm_out", x, cin, c_.norm_num_groups, kEps));
    return causal_conv(p + ".conv_out", h, cin, cout, 3);
  }

  const HunyuanVideoVaeConfig& c_;
  GraphBuilder b_;
};

}  // namespace

namespace {

Graph encoder_graph(const HunyuanVideoVaeConfig& c, bool moments_only) {
  HvBuilder k(c, moments_only ? "video.encoder_moments" : "video.encoder");
  GraphBuilder& b = k.b_;
  const auto& boc = c.block_out_channels;
  int h = k.causal_conv("encoder.conv_in", b.input("sample"), c.in_channels, boc[0], 3);
  int prev = boc[0];
  for (int i = 0; i < c.levels(); ++i) {
    const std::string block = "encoder.down_blocks." + std::to_string(i);
    for (int j = 0; j < c.layers_per_block; ++j)
      h = k.resnet(block + ".resnets." + std::to_string(j), h, j == 0 ? prev : boc[i], boc[i]);
    const bool space = c.resamples_space(i), time = c.resamples_time(i);
    if (space || time)  // DownsampleCausal3D: one causal conv of stride (t, s, s)
      h = k.causal_conv(block + ".downsamplers.0.conv", h, boc[i], boc[i], 3,
                        {time ? 2 : 1, space ? 2 : 1, space ? 2 : 1});
    b.module(block, h);
    prev = boc[i];
  }
  const int top = boc.back();
  h = k.mid_block("encoder.mid_block", h, top);
  h = k.out("encoder", h, top, 2 * c.latent_channels);  // double_z
  b.module("encoder", h);
  const int lat = c.latent_channels;
  h = b.conv("quant_conv", h, 2 * lat, 2 * lat, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0},
             {0, 0, 0}, PadMode::kZeros);
  if (moments_only) {
    b.output("moments", h);
    return b.finish();
  }
  // DiagonalGaussianDistribution: mean, logvar = chunk(moments, 2); logvar clamped.
  const int mean = b.slice_channels("posterior.mean", h, 0, lat);
  const int raw = b.slice_channels("posterior.logvar_unclamped", h, lat, 2 * lat);
  b.output("mean", mean);
  b.output("logvar", b.clamp("posterior.logvar", raw, -30.0, 20.0));
  return b.finish();
}

}  // namespace

Graph build_hunyuan_video_encoder_graph(const HunyuanVideoVaeConfig& c) {
  return encoder_graph(c, false);
}

Graph build_hunyuan_video_moments_graph(const HunyuanVideoVaeConfig& c) {
  return encoder_graph(c, true);
}

Graph build_hunyuan_video_decoder_graph(const HunyuanVideoVaeConfig& c) {
  HvBuilder k(c, "video.decoder");
  GraphBuilder& b = k.b_;
  const int lat = c.latent_channels;
  int h = b.conv("post_quant_conv", b.input("latents"), lat, lat, {1, 1, 1}, {1, 1, 1}, {1, 1, 1},
                 {0, 0, 0}, {0, 0, 0}, PadMode::kZeros);
  std::vector<int> rev(c.block_out_channels.rbegin(), c.block_out_channels.rend());
  h = k.causal_conv("decoder.conv_in", h, lat, rev[0], 3);
  h = k.mid_block("decoder.mid_block", h, rev[0]);
  int prev = rev[0];
  for (int i = 0; i < c.levels(); ++i) {
    const std::string block = "decoder.up_blocks." + std::to_string(i);
    for (int j = 0; j <= c.layers_per_block; ++j)  // layers_per_block + 1 resnets
      h = k.resnet(block + ".resnets." + std::to_string(j), h, j == 0 ? prev : rev[i], rev[i]);
    const bool space = c.resamples_space(i), time = c.resamples_time(i);
    if (space || time) h = k.upsample(block + ".upsamplers.0", h, rev[i], space, time);
    b.module(block, h);
    prev = rev[i];
  }
  h = k.out("decoder", h, c.block_out_channels[0], c.out_channels);
  b.module("decoder", h);
  b.output("sample", h);
  return b.finish();
}

}  // namespace tp
