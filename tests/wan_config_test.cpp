// WanTransformer3DModel's config.json and state dict (issue 40's first step, before its graph):
// diffusers' defaults and quirks, every key and shape against the checkpoints diffusers wrote
// (tests/fixtures/golden-wan) and the parameter counts of ../shared/docs/reference/dit-facts.md.
#include "harness/models/wan_transformer_3d/wan_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/core/checkpoint.h"

namespace tp {
namespace {

int64_t parameters(const std::vector<ParamSpec>& specs) {
  int64_t n = 0;
  for (const ParamSpec& s : specs) n += shape_numel(s.shape);
  return n;
}

WanConfig parsed(const nlohmann::json& j) {
  auto c = parse_wan_config(j, "config.json");
  if (!c.ok()) throw std::runtime_error(c.error().message());
  return *c;
}

TEST(WanConfig, DefaultsAreThe14BAndCountsMatchDiffusers) {
  const WanConfig big = parsed(nlohmann::json::object());
  EXPECT_EQ(big.inner_dim(), 5120);
  EXPECT_EQ(wan_param_specs(big).size(), 1095u);
  EXPECT_EQ(parameters(wan_param_specs(big)), 14288491584);
  // Wan2.1-T2V-1.3B as the conversion script writes it; qk_norm's value has no effect.
  const WanConfig small = parsed({{"num_attention_heads", 12},
                                  {"ffn_dim", 8960},
                                  {"num_layers", 30},
                                  {"qk_norm", "anything"},
                                  {"image_dim", nullptr},
                                  {"out_channels", nullptr}});
  const std::vector<ParamSpec> specs = wan_param_specs(small);
  EXPECT_EQ(specs.size(), 825u);
  EXPECT_EQ(parameters(specs), 1418996800);
  EXPECT_EQ(specs.front().key, "scale_shift_table");
  EXPECT_EQ(specs[1].shape, (Shape{1536, 16, 1, 2, 2}));
  EXPECT_EQ(specs.back().key, "proj_out.bias");
  EXPECT_EQ(specs.back().shape, (Shape{64}));
  EXPECT_EQ(small.out_channels, 16);
  EXPECT_EQ(small.rope_t_dim(), 44);
  EXPECT_EQ(small.rope_h_dim(), 42);
}

// Every fixture's checkpoint, written by diffusers' save_pretrained, holds exactly the keys and
// shapes its config gives (tiny-wan: 69 keys, 40,864 parameters).
TEST(WanConfig, DiffusersCheckpointsHoldExactlyTheSpecs) {
  const std::string root = std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-wan/";
  for (const char* name : {"tiny-wan", "wan-odd-patch", "wan-temporal-patch"}) {
    std::ifstream in(root + name + "/config.json");
    const WanConfig c = parsed(nlohmann::json::parse(in));
    const std::vector<ParamSpec> specs = wan_param_specs(c);
    auto weights = load_checkpoint(root + name + "/diffusion_pytorch_model.safetensors", specs);
    EXPECT_TRUE(weights.ok()) << name << ": " << weights.error().message();
    if (std::string(name) == "tiny-wan") {
      EXPECT_EQ(specs.size(), 69u);
      EXPECT_EQ(parameters(specs), 40864);
    }
  }
}

TEST(WanConfig, WhatTwinpathDoesNotBuildIsRefusedByName) {
  struct Bad {
    nlohmann::json config;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {{{"image_dim", 1280}}, "image_dim 1280 is not supported"},
           {{{"added_kv_proj_dim", 5120}}, "added_kv_proj_dim 5120 is not supported"},
           {{{"pos_embed_seq_len", 514}}, "pos_embed_seq_len 514 is not supported"},
           {{{"patch_size", {1, 2}}}, "patch_size must list 3 sizes"},
           {{{"patch_size", {1, 0, 2}}}, "every patch_size entry must be at least 1"},
           {{{"attention_head_dim", 4}}, "attention_head_dim 4 splits into RoPE parts"},
           {{{"attention_head_dim", 16}, {"num_layers", 0}}, "num_layers must be at least 1"},
           {{{"freq_dim", 33}}, "freq_dim 33 is odd"},
           {{{"num_attention_heads", "12"}}, "num_attention_heads"},
           {nlohmann::json::array(), "config must be a JSON object"}}) {
    auto c = parse_wan_config(b.config, "config.json");
    ASSERT_FALSE(c.ok()) << b.config.dump();
    EXPECT_NE(c.error().message().find(b.says), std::string::npos) << c.error().message();
  }
}

}  // namespace
}  // namespace tp
