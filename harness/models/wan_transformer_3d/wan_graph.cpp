// Ports diffusers WanTransformer3DModel (models/transformers/transformer_wan.py: the patch
// embedding, WanRotaryPosEmbed, WanTimeTextImageEmbedding, WanTransformerBlock, WanAttention
// with WanAttnProcessor, the output modulation and unpatchify; dit-facts 2-6). Op and module
// names are the state-dict paths; steps without a module of their own are named under the
// module they belong to.
#include <cmath>

#include "harness/models/wan_transformer_3d/wan_config.h"

namespace tp {
namespace {

struct Builder {
  const WanConfig& c;
  GraphBuilder b{"wan"};
  int64_t d = c.inner_dim();
  int grid = -1;  // the patch embedding [B,D,F,H,W]: the token grid RoPE and unpatchify read
  int text = -1;  // the projected text [B,L,D]

  // x * (1 + scale) + shift, each of scale and shift [B,1,D] (diffusers computes it in fp32).
  int modulate(const std::string& p, int x, int scale, int shift) {
    OpAttrs one_plus;
    one_plus.shift = 1;
    const int s = b.unary(p + ".one_plus_scale", OpKind::kAffine, scale, one_plus);
    b.fp32_result(s);
    return b.binary(p + ".shift", BinaryOp::kAdd, b.binary(p + ".scale", BinaryOp::kMul, x, s),
                    shift);
  }

  // WanAttention with WanAttnProcessor: to_q/to_k/to_v with bias, RMSNorm of q and k across
  // heads, RoPE on q and k in self-attention, SDPA (scale head_dim^-0.5), to_out.0.
  int attention(const std::string& p, int x, int context, bool rope) {
    int q = b.rms_norm(p + ".norm_q", b.linear_last(p + ".to_q", x, d, d), d, c.eps, true);
    int k = b.rms_norm(p + ".norm_k", b.linear_last(p + ".to_k", context, d, d), d, c.eps, true);
    const int v = b.linear_last(p + ".to_v", context, d, d);
    if (rope) {
      const std::vector<int64_t> shares{c.rope_t_dim(), c.rope_h_dim(), c.rope_w_dim()};
      const int heads = c.num_attention_heads;
      q = b.rotary_embedding(p + ".rotary_q", q, grid, heads, shares, 10000);
      k = b.rotary_embedding(p + ".rotary_k", k, grid, heads, shares, 10000);
    }
    const int o = b.multi_head_attention(p + ".sdpa", q, k, v, c.num_attention_heads,
                                         1 / std::sqrt(double(c.attention_head_dim)));
    const int out = b.linear_last(p + ".to_out.0", o, d, d);
    b.module(p, out);
    return out;
  }

  // The `.float()` values of diffusers' forward (dit-facts 5): fp32 in a 16-bit model too.
  void fp32_results(std::initializer_list<int> values) {
    for (int v : values) b.fp32_result(v);
  }

  // WanTransformerBlock (dit-facts 5): the table plus the time projection gives six [B,1,D]
  // vectors; modulated self-attention with a gated residual, cross-attention on the text with a
  // plain residual, modulated feed-forward with a gated residual.
  int block(const std::string& p, int h, int time_proj) {
    const int mod =
        b.add_parameter(p + ".modulation", time_proj, p + ".scale_shift_table", {1, 6, d});
    std::vector<int> m;
    const char* names[] = {"shift_msa",   "scale_msa",   "gate_msa",
                           "c_shift_msa", "c_scale_msa", "c_gate_msa"};
    for (int i = 0; i < 6; ++i) m.push_back(b.slice(p + "." + names[i], mod, 1, i, i + 1));
    fp32_results({mod, m[0], m[1], m[2], m[3], m[4], m[5]});
    int n = modulate(p + ".norm1", b.layer_norm(p + ".norm1", h, {d}, c.eps, false), m[1], m[0]);
    int a = attention(p + ".attn1", n, n, true);
    h = b.binary(p + ".attn1.residual", BinaryOp::kAdd, h,
                 b.binary(p + ".attn1.gate", BinaryOp::kMul, a, m[2]));
    n = c.cross_attn_norm ? b.layer_norm(p + ".norm2", h, {d}, c.eps, true) : h;
    a = attention(p + ".attn2", n, text, false);
    h = b.binary(p + ".attn2.residual", BinaryOp::kAdd, h, a);
    n = modulate(p + ".norm3", b.layer_norm(p + ".norm3", h, {d}, c.eps, false), m[4], m[3]);
    const int proj = b.linear_last(p + ".ffn.net.0.proj", n, d, c.ffn_dim);
    const int act = b.gelu(p + ".ffn.net.0.gelu", proj, true);
    b.module(p + ".ffn.net.0", act);
    const int f = b.linear_last(p + ".ffn.net.2", act, c.ffn_dim, d);
    b.module(p + ".ffn", f);
    h = b.binary(p + ".ffn.residual", BinaryOp::kAdd, h,
                 b.binary(p + ".ffn.gate", BinaryOp::kMul, f, m[5]));
    b.module(p, h);
    return h;
  }

  // WanTimeTextImageEmbedding: the sinusoid (cos first, no shift), the time MLP (temb), its
  // SiLU'd projection to six vectors, and the text MLP (tanh GELU). Returns temb and the
  // projection as [B,6,D].
  std::pair<int, int> condition(int timestep, int context) {
    const std::string p = "condition_embedder";
    // The time embedder is kept in fp32 (_keep_in_fp32_modules) and its input cast to it; its
    // output is cast back to the model's dtype (type_as(encoder_hidden_states)).
    const int sinusoid = b.timestep_embedding(p + ".timesteps_proj", timestep, c.freq_dim, true, 0);
    const int hidden = b.linear_last(p + ".time_embedder.linear_1", sinusoid, c.freq_dim, d);
    const int t = b.unary(p + ".time_embedder.act", OpKind::kSilu, hidden);
    fp32_results({sinusoid, hidden, t});
    const int temb = b.linear_last(p + ".time_embedder.linear_2", t, d, d);
    b.module(p + ".time_embedder", temb);
    int proj =
        b.linear_last(p + ".time_proj", b.unary(p + ".act_fn", OpKind::kSilu, temb), d, 6 * d);
    proj = b.reshape(p + ".time_proj.unflatten", proj, {0, 6, -1});
    int x = b.linear_last(p + ".text_embedder.linear_1", context, c.text_dim, d);
    x = b.gelu(p + ".text_embedder.act_1", x, true);
    text = b.linear_last(p + ".text_embedder.linear_2", x, d, d);
    b.module(p + ".text_embedder", text);
    b.module(p, temb);  // WanTimeTextImageEmbedding returns (temb, timestep_proj, text, image)
    return {temb, proj};
  }

  Graph build() {
    // WanTransformer3DModel's class attributes (transformer_wan.py L547-549).
    b.keep_in_fp32_modules(
        {"rope", "time_embedder", "scale_shift_table", "norm1", "norm2", "norm3"});
    b.skip_layerwise_casting({"patch_embedding", "condition_embedder", "norm"});
    const int x = b.input("hidden_states");
    const int timestep = b.input("timestep");
    const int context = b.input("encoder_hidden_states");
    std::vector<int> patch(c.patch_size.begin(), c.patch_size.end());
    grid = b.conv("patch_embedding", x, c.in_channels, int(d), patch, patch, {1, 1, 1}, {0, 0, 0},
                  {0, 0, 0}, PadMode::kZeros);
    int h = b.permute("patch_embedding.tokens",
                      b.reshape("patch_embedding.flatten", grid, {0, 0, -1}), {0, 2, 1});
    const auto [temb, time_proj] = condition(timestep, context);
    for (int i = 0; i < c.num_layers; ++i) h = block("blocks." + std::to_string(i), h, time_proj);
    // The output modulation reads temb (before the SiLU and time_proj): row 0 shift, row 1 scale.
    const int mod = b.add_parameter("modulation", b.reshape("temb.unsqueeze", temb, {0, 1, -1}),
                                    "scale_shift_table", {1, 2, d});
    const int shift = b.slice("shift", mod, 1, 0, 1), scale = b.slice("scale", mod, 1, 1, 2);
    fp32_results({mod, shift, scale});
    h = modulate("norm_out", b.layer_norm("norm_out", h, {d}, c.eps, false), scale, shift);
    h = b.linear_last("proj_out", h, d, int64_t(c.out_channels) * c.patch_elements());
    const std::vector<int64_t> p(c.patch_size.begin(), c.patch_size.end());
    b.output("sample", b.unpatchify("unpatchify", h, grid, p));
    return b.finish();
  }
};

}  // namespace

Graph build_wan_graph(const WanConfig& config) { return Builder{config}.build(); }

}  // namespace tp
