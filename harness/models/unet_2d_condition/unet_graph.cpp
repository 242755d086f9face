// Ports diffusers UNet2DConditionModel (models/unets/unet_2d_condition.py, unet_2d_blocks.py,
// resnet.py ResnetBlock2D, transformers/transformer_2d.py, attention.py BasicTransformerBlock
// and FeedForward/GEGLU, embeddings.py Timesteps/TimestepEmbedding). Op and module names are the
// state-dict paths, so every module output is a checkpoint.
#include <cmath>

#include "harness/models/unet_2d_condition/unet_config.h"

namespace tp {
namespace {

struct Builder {
  const UnetConfig& c;
  GraphBuilder b{"unet"};
  int temb = -1;  // [B, time_embed_dim]
  int context = -1;

  int silu(const std::string& name, int x) { return b.unary(name, OpKind::kSilu, x); }

  // ResnetBlock2D, time_embedding_norm "default": the time projection added before norm2.
  int resnet(const std::string& p, int x, int cin, int cout, double output_scale = 1) {
    int h = silu(p + ".nonlinearity",
                 b.group_norm(p + ".norm1", x, cin, c.norm_num_groups, c.norm_eps));
    h = b.conv2d_same(p + ".conv1", h, cin, cout, 3);
    int t =
        b.linear_last(p + ".time_emb_proj", silu(p + ".time_act", temb), c.time_embed_dim, cout);
    t = b.reshape(p + ".time_emb_proj.unsqueeze", t, {0, -1, 1, 1});
    h = b.binary(p + ".add_time", BinaryOp::kAdd, h, t);
    h = silu(p + ".nonlinearity_2",
             b.group_norm(p + ".norm2", h, cout, c.norm_num_groups, c.norm_eps));
    h = b.conv2d_same(p + ".conv2", h, cout, cout, 3);
    const int shortcut = cin == cout ? x : b.conv2d_same(p + ".conv_shortcut", x, cin, cout, 1);
    h = b.add(p + ".add", shortcut, h);
    if (output_scale != 1) {
      OpAttrs divide;
      divide.scale = 1 / output_scale;
      h = b.unary(p + ".output_scale", OpKind::kAffine, h, divide);
    }
    b.module(p, h);
    return h;
  }

  // Attention (AttnProcessor2_0): to_q/to_k/to_v without bias, SDPA with scale head_dim^-0.5,
  // to_out.0 with bias.
  int attention(const std::string& p, int x, int kv, int dim, int kv_dim, int heads) {
    const int q = b.linear_last(p + ".to_q", x, dim, dim, false);
    const int k = b.linear_last(p + ".to_k", kv, kv_dim, dim, false);
    const int v = b.linear_last(p + ".to_v", kv, kv_dim, dim, false);
    const double head_dim = double(dim) / heads;
    const int o = b.multi_head_attention(p + ".sdpa", q, k, v, heads, 1 / std::sqrt(head_dim));
    const int out = b.linear_last(p + ".to_out.0", o, dim, dim);
    b.module(p, out);
    return out;
  }

  // BasicTransformerBlock: norm1 -> attn1 (self) -> +, norm2 -> attn2 (cross) -> +,
  // norm3 -> FeedForward (GEGLU: hidden * gelu(gate), gate the second half) -> +.
  int transformer_block(const std::string& p, int h, int dim, int heads, int cross_dim) {
    int n = b.layer_norm(p + ".norm1", h, {dim}, 1e-5, true);
    h = b.binary(p + ".attn1.residual", BinaryOp::kAdd,
                 attention(p + ".attn1", n, n, dim, dim, heads), h);
    n = b.layer_norm(p + ".norm2", h, {dim}, 1e-5, true);
    h = b.binary(p + ".attn2.residual", BinaryOp::kAdd,
                 attention(p + ".attn2", n, context, dim, cross_dim, heads), h);
    n = b.layer_norm(p + ".norm3", h, {dim}, 1e-5, true);
    const int inner = 4 * dim;
    const int proj = b.linear_last(p + ".ff.net.0.proj", n, dim, 2 * inner);
    const int hidden = b.slice(p + ".ff.net.0.hidden", proj, -1, 0, inner);
    const int gate = b.gelu(p + ".ff.net.0.gelu",
                            b.slice(p + ".ff.net.0.gate", proj, -1, inner, 2 * inner), false);
    const int geglu = b.binary(p + ".ff.net.0.mul", BinaryOp::kMul, hidden, gate);
    b.module(p + ".ff.net.0", geglu);
    const int ff = b.linear_last(p + ".ff.net.2", geglu, inner, dim);
    b.module(p + ".ff", ff);
    h = b.binary(p + ".ff.residual", BinaryOp::kAdd, ff, h);
    b.module(p, h);
    return h;
  }

  // Transformer2DModel (continuous input): GroupNorm (eps 1e-6), proj_in (1x1 conv, or linear on
  // tokens), the blocks on [B, H*W, C] tokens, proj_out, + the input.
  int transformer(const std::string& p, int x, int ch, int layers, int heads, int cross_dim) {
    int h = b.group_norm(p + ".norm", x, ch, c.norm_num_groups, 1e-6);
    if (!c.use_linear_projection) {
      h = b.to_tokens(p + ".to_tokens", b.conv2d_same(p + ".proj_in", h, ch, ch, 1), ch);
    } else {
      h = b.linear_last(p + ".proj_in", b.to_tokens(p + ".to_tokens", h, ch), ch, ch);
    }
    for (int k = 0; k < layers; ++k)
      h = transformer_block(p + ".transformer_blocks." + std::to_string(k), h, ch, heads,
                            cross_dim);
    if (!c.use_linear_projection) {
      h = b.conv2d_same(p + ".proj_out", b.to_image(p + ".to_image", h, x), ch, ch, 1);
    } else {
      h = b.to_image(p + ".to_image", b.linear_last(p + ".proj_out", h, ch, ch), x);
    }
    h = b.add(p + ".residual", h, x);
    b.module(p, h);
    return h;
  }

  // Timesteps -> TimestepEmbedding, and for text_time the added embedding (text first).
  void time_embedding(int timestep, int text_embeds, int time_ids) {
    const int c0 = c.block_out_channels[0];
    const int t = b.timestep_embedding("time_proj", timestep, c0, c.flip_sin_to_cos, c.freq_shift);
    int e = b.linear_last("time_embedding.linear_1", t, c0, c.time_embed_dim);
    e = b.linear_last("time_embedding.linear_2", silu("time_embedding.act", e), c.time_embed_dim,
                      c.time_embed_dim);
    b.module("time_embedding", e);
    if (c.text_time) {
      int ids = b.timestep_embedding("add_time_proj", time_ids, c.addition_time_embed_dim,
                                     c.flip_sin_to_cos, c.freq_shift);
      ids = b.reshape("add_time_proj.flatten", ids, {0, -1});
      const int added = b.concat("add_embeds", {text_embeds, ids}, -1);
      int a = b.linear_last("add_embedding.linear_1", added,
                            c.projection_class_embeddings_input_dim, c.time_embed_dim);
      a = b.linear_last("add_embedding.linear_2", silu("add_embedding.act", a), c.time_embed_dim,
                        c.time_embed_dim);
      b.module("add_embedding", a);
      e = b.binary("emb", BinaryOp::kAdd, e, a);
    }
    temb = e;
  }

  Graph build() {
    int sample = b.input("sample");
    const int timestep = b.input("timestep");
    context = b.input("encoder_hidden_states");
    const int text_embeds = c.text_time ? b.input("text_embeds") : -1;
    const int time_ids = c.text_time ? b.input("time_ids") : -1;
    time_embedding(timestep, text_embeds, time_ids);
    if (c.center_input_sample) {
      OpAttrs center;
      center.scale = 2;
      center.shift = -1;
      sample = b.unary("center_input_sample", OpKind::kAffine, sample, center);
    }
    const std::vector<int>& boc = c.block_out_channels;
    const int n = c.levels();
    int h = b.conv2d_same("conv_in", sample, c.in_channels, boc[0], c.conv_in_kernel);
    std::vector<std::pair<int, int>> skips{{h, boc[0]}};  // value, channels
    for (int i = 0; i < n; ++i) {
      const std::string p = "down_blocks." + std::to_string(i);
      const bool attn = c.down_block_types[std::size_t(i)] == "CrossAttnDownBlock2D";
      int ch = i == 0 ? boc[0] : boc[std::size_t(i - 1)];
      const int out = boc[std::size_t(i)];
      for (int j = 0; j < c.layers_per_block[std::size_t(i)]; ++j) {
        h = resnet(p + ".resnets." + std::to_string(j), h, ch, out);
        ch = out;
        if (attn)
          h = transformer(p + ".attentions." + std::to_string(j), h, out,
                          c.transformer_layers_per_block[std::size_t(i)], c.heads[std::size_t(i)],
                          c.cross_attention_dim[std::size_t(i)]);
        skips.emplace_back(h, out);
      }
      if (i + 1 < n) {
        const int pad = c.downsample_padding;
        h = b.conv2d(p + ".downsamplers.0.conv", h, out, out, 3, 2, pad, pad == 0 ? 1 : pad, pad,
                     pad == 0 ? 1 : pad, true);
        b.module(p + ".downsamplers.0", h);
        skips.emplace_back(h, out);
      }
      b.module(p, h);
    }
    if (c.mid_block) {
      const int ch = boc.back();
      h = resnet("mid_block.resnets.0", h, ch, ch, c.mid_block_scale_factor);
      h = transformer("mid_block.attentions.0", h, ch, c.transformer_layers_per_block.back(),
                      c.heads.back(), c.cross_attention_dim.back());
      h = resnet("mid_block.resnets.1", h, ch, ch, c.mid_block_scale_factor);
      b.module("mid_block", h);
    }
    int ch = boc.back();
    for (int i = 0; i < n; ++i) {
      const std::string p = "up_blocks." + std::to_string(i);
      const std::size_t r = std::size_t(n - 1 - i);  // the reversed per-level lists
      const bool attn = c.up_block_types[std::size_t(i)] == "CrossAttnUpBlock2D";
      const int out = boc[r];
      const int layers = c.layers_per_block[r] + 1;
      for (int j = 0; j < layers; ++j) {
        const auto [skip, skip_ch] = skips.back();
        skips.pop_back();
        const std::string rp = p + ".resnets." + std::to_string(j);
        h = b.concat(rp + ".cat", {h, skip}, 1);  // the current first, the skip second
        h = resnet(rp, h, ch + skip_ch, out);
        ch = out;
        if (attn)
          h = transformer(p + ".attentions." + std::to_string(j), h, out,
                          c.transformer_layers_per_block[r], c.heads[r], c.cross_attention_dim[r]);
      }
      if (i + 1 < n) {
        // Upsample2D: nearest to the next skip's size (2x unless a latent size is odd), conv.
        h = b.interpolate_nearest(p + ".upsamplers.0.interpolate", h, skips.back().first);
        h = b.conv2d_same(p + ".upsamplers.0.conv", h, out, out, 3);
        b.module(p + ".upsamplers.0", h);
      }
      b.module(p, h);
    }
    h = silu("conv_act", b.group_norm("conv_norm_out", h, boc[0], c.norm_num_groups, c.norm_eps));
    h = b.conv2d_same("conv_out", h, boc[0], c.out_channels, c.conv_out_kernel);
    b.output("sample", h);
    return b.finish();
  }
};

}  // namespace

Graph build_unet_graph(const UnetConfig& config) { return Builder{config}.build(); }

}  // namespace tp
