#include "harness/models/autoencoder_kl/kl_config.h"

#include <nlohmann/json.hpp>

#include "harness/core/json_config.h"
#include "harness/core/untrusted_json.h"

namespace tp {
namespace {

using nlohmann::json;

Status expect_all(const json& j, const char* key, const std::string& value, std::size_t count,
                  const std::string& source) {
  auto it = j.find(key);
  if (it == j.end()) return Status();
  if (!it->is_array() || it->size() != count)
    return Error(source + ": '" + key + "' must list " + std::to_string(count) +
                 " entries, one per block_out_channels entry");
  for (const auto& v : *it)
    if (v != value)
      return Error(source + ": '" + key + "' entry " + json_excerpt(v) +
                   " is not supported; twinpath builds " + value);
  return Status();
}

Expected<KlConfig> parse_kl(const json& j, const std::string& src) {
  KlConfig c;
  TP_RETURN_IF_ERROR(read_field(j, "in_channels", c.in_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "out_channels", c.out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "block_out_channels", c.block_out_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "layers_per_block", c.layers_per_block, src));
  TP_RETURN_IF_ERROR(read_field(j, "latent_channels", c.latent_channels, src));
  TP_RETURN_IF_ERROR(read_field(j, "norm_num_groups", c.norm_num_groups, src));
  if (auto it = j.find("sample_size"); it != j.end() && it->is_array() && !it->empty()) {
    if (!(*it)[0].is_number_integer()) return Error(src + ": sample_size entries must be integers");
    c.sample_size = (*it)[0].get<int>();  // diffusers uses sample_size[0] for tiling
  } else {
    TP_RETURN_IF_ERROR(read_field(j, "sample_size", c.sample_size, src));
  }
  TP_RETURN_IF_ERROR(read_field(j, "scaling_factor", c.scaling_factor, src));
  if (auto it = j.find("shift_factor"); it != j.end() && !it->is_null()) {
    double shift = 0;
    TP_RETURN_IF_ERROR(read_field(j, "shift_factor", shift, src));
    c.shift_factor = shift;
  }
  TP_RETURN_IF_ERROR(read_field(j, "force_upcast", c.force_upcast, src));
  TP_RETURN_IF_ERROR(read_field(j, "use_quant_conv", c.use_quant_conv, src));
  TP_RETURN_IF_ERROR(read_field(j, "use_post_quant_conv", c.use_post_quant_conv, src));
  TP_RETURN_IF_ERROR(read_field(j, "mid_block_add_attention", c.mid_block_add_attention, src));
  std::string act = "silu";
  TP_RETURN_IF_ERROR(read_field(j, "act_fn", act, src));
  if (act != "silu")
    return Error(
        src + ": act_fn '" + act +
        "' is not supported; twinpath builds AutoencoderKL with silu (as every SD/SDXL VAE uses)");
  const std::size_t levels = c.block_out_channels.size();
  if (levels == 0) return Error(src + ": block_out_channels is empty");
  if (levels > kMaxLevels || c.layers_per_block > kMaxLayersPerBlock || c.norm_num_groups < 1)
    return Error(src + ": block_out_channels lists " + std::to_string(levels) +
                 " levels, layers_per_block is " + std::to_string(c.layers_per_block) +
                 " and norm_num_groups " + std::to_string(c.norm_num_groups) +
                 "; twinpath builds up to " + std::to_string(kMaxLevels) + " levels of up to " +
                 std::to_string(kMaxLayersPerBlock) + " layers, with at least one group");
  TP_RETURN_IF_ERROR(expect_all(j, "down_block_types", "DownEncoderBlock2D", levels, src));
  TP_RETURN_IF_ERROR(expect_all(j, "up_block_types", "UpDecoderBlock2D", levels, src));
  for (int ch : c.block_out_channels)
    if (ch <= 0 || ch % c.norm_num_groups != 0)
      return Error(src + ": block_out_channels entry " + std::to_string(ch) +
                   " is not a positive multiple of norm_num_groups " +
                   std::to_string(c.norm_num_groups));
  if (c.layers_per_block < 1 || c.latent_channels < 1 || c.in_channels < 1 || c.out_channels < 1)
    return Error(
        src + ": layers_per_block, latent_channels, in_channels and out_channels must be positive");
  return c;
}

}  // namespace

Expected<std::shared_ptr<VaeConfig>> parse_kl_config(const json& j, const std::string& source) {
  auto c = std::make_shared<KlVaeConfig>();
  TP_ASSIGN_OR_RETURN(c->kl, parse_kl(j, source));
  return std::shared_ptr<VaeConfig>(std::move(c));
}

}  // namespace tp
