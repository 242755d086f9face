#include "harness/models/wan_transformer_3d/wan_config.h"

#include "harness/core/json_config.h"

namespace tp {
namespace {

using nlohmann::json;

// Fields the text-to-video model leaves null, whose other values build parts twinpath does not.
Status expect_null(const json& j, const char* key, const std::string& src, const char* what) {
  if (auto it = j.find(key); it != j.end() && !it->is_null())
    return Error(src + ": " + key + " " + it->dump() + " is not supported; twinpath builds " +
                 what);
  return Status();
}

Status check_positive(const WanConfig& c, const std::string& src) {
  const std::pair<const char*, int> sizes[] = {{"num_attention_heads", c.num_attention_heads},
                                               {"attention_head_dim", c.attention_head_dim},
                                               {"in_channels", c.in_channels},
                                               {"out_channels", c.out_channels},
                                               {"text_dim", c.text_dim},
                                               {"freq_dim", c.freq_dim},
                                               {"ffn_dim", c.ffn_dim},
                                               {"num_layers", c.num_layers},
                                               {"rope_max_seq_len", c.rope_max_seq_len}};
  for (const auto& [key, value] : sizes)
    if (value < 1) return Error(src + ": " + key + " must be at least 1");
  for (int p : c.patch_size)
    if (p < 1) return Error(src + ": every patch_size entry must be at least 1");
  if (c.num_layers > kMaxLayersPerBlock * int(kMaxLevels))
    return Error(src + ": num_layers " + std::to_string(c.num_layers) +
                 " is past what twinpath builds (" +
                 std::to_string(kMaxLayersPerBlock * int(kMaxLevels)) + ")");
  return Status();
}

}  // namespace

Expected<WanConfig> parse_wan_config(const json& j, const std::string& src) {
  if (!j.is_object()) return Error(src + ": config must be a JSON object");
  WanConfig c;
  std::vector<int> patch(c.patch_size.begin(), c.patch_size.end());
  TP_RETURN_IF_ERROR(read_field(j, "patch_size", patch, src));
  if (patch.size() != 3)
    return Error(src + ": patch_size must list 3 sizes (frames, height, width)");
  std::copy(patch.begin(), patch.end(), c.patch_size.begin());
  TP_RETURN_IF_ERROR(read_field(j, "num_attention_heads", c.num_attention_heads, src));
  TP_RETURN_IF_ERROR(read_field(j, "attention_head_dim", c.attention_head_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "in_channels", c.in_channels, src));
  c.out_channels = c.in_channels;  // `out_channels or in_channels`
  TP_RETURN_IF_ERROR(read_field(j, "out_channels", c.out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "text_dim", c.text_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "freq_dim", c.freq_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "ffn_dim", c.ffn_dim, src));
  TP_RETURN_IF_ERROR(read_field(j, "num_layers", c.num_layers, src));
  TP_RETURN_IF_ERROR(read_field(j, "cross_attn_norm", c.cross_attn_norm, src));
  TP_RETURN_IF_ERROR(read_field(j, "eps", c.eps, src));
  TP_RETURN_IF_ERROR(read_field(j, "rope_max_seq_len", c.rope_max_seq_len, src));
  std::string qk_norm;  // read for its type only: diffusers ignores its value (dit-facts 1.1)
  TP_RETURN_IF_ERROR(read_field(j, "qk_norm", qk_norm, src));
  TP_RETURN_IF_ERROR(expect_null(j, "image_dim", src, "the text-to-video model (no image tokens)"));
  TP_RETURN_IF_ERROR(expect_null(j, "added_kv_proj_dim", src,
                                 "the text-to-video model (no added key/value projections)"));
  TP_RETURN_IF_ERROR(
      expect_null(j, "pos_embed_seq_len", src, "RoPE alone (no learned position embedding)"));
  TP_RETURN_IF_ERROR(check_positive(c, src));
  if (c.freq_dim % 2)
    return Error(src + ": freq_dim " + std::to_string(c.freq_dim) +
                 " is odd; the timestep sinusoid takes half cosines, half sines");
  if (c.rope_h_dim() < 2 || c.rope_t_dim() < 2 || c.rope_t_dim() % 2)
    return Error(src + ": attention_head_dim " + std::to_string(c.attention_head_dim) +
                 " splits into RoPE parts of " + std::to_string(c.rope_t_dim()) + ", " +
                 std::to_string(c.rope_h_dim()) + " and " + std::to_string(c.rope_w_dim()) +
                 " (frames, height, width), each of which must be even and at least 2; use a "
                 "multiple of 2 of at least 6 whose remainder by 12 is not 4 or 10 (e.g. 12, 16, "
                 "24, 128)");
  if (!(c.eps > 0)) return Error(src + ": eps must be positive");
  return c;
}

std::vector<ParamSpec> wan_param_specs(const WanConfig& c) {
  const int64_t d = c.inner_dim(), f = c.ffn_dim;
  std::vector<ParamSpec> s;
  auto linear = [&](const std::string& key, int64_t out, int64_t in) {
    s.push_back({key + ".weight", {out, in}});
    s.push_back({key + ".bias", {out}});
  };
  s.push_back({"scale_shift_table", {1, 2, d}});
  s.push_back({"patch_embedding.weight",
               {d, c.in_channels, c.patch_size[0], c.patch_size[1], c.patch_size[2]}});
  s.push_back({"patch_embedding.bias", {d}});
  linear("condition_embedder.time_embedder.linear_1", d, c.freq_dim);
  linear("condition_embedder.time_embedder.linear_2", d, d);
  linear("condition_embedder.time_proj", 6 * d, d);
  linear("condition_embedder.text_embedder.linear_1", d, c.text_dim);
  linear("condition_embedder.text_embedder.linear_2", d, d);
  for (int b = 0; b < c.num_layers; ++b) {
    const std::string block = "blocks." + std::to_string(b) + ".";
    s.push_back({block + "scale_shift_table", {1, 6, d}});
    for (const char* attn : {"attn1", "attn2"}) {
      const std::string a = block + attn;
      for (const char* proj : {".to_q", ".to_k", ".to_v", ".to_out.0"}) linear(a + proj, d, d);
      s.push_back({a + ".norm_q.weight", {d}});
      s.push_back({a + ".norm_k.weight", {d}});
    }
    if (c.cross_attn_norm) {
      s.push_back({block + "norm2.weight", {d}});
      s.push_back({block + "norm2.bias", {d}});
    }
    linear(block + "ffn.net.0.proj", f, d);
    linear(block + "ffn.net.2", d, f);
  }
  linear("proj_out", int64_t(c.out_channels) * c.patch_elements(), d);
  return s;
}

}  // namespace tp
