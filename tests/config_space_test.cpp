// Drawn configs (issue 43, harness/models/config_space.h): every draw of every family's space is
// a config the family parses and builds, the same seed draws the same config, the draws cover
// the space, and a sweep of draws expands in a suite line.
#include "harness/models/config_space.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cases/suite.h"
#include "harness/core/untrusted_json.h"
#include "harness/models/model.h"

namespace tp {
namespace {

nlohmann::json drawn(const std::string& family, int seed) {
  auto text = builtin_config_text("random:" + family + ":" + std::to_string(seed));
  EXPECT_TRUE(text.ok()) << text.error().message();
  auto j = parse_untrusted_json(text.ok() ? *text : "{}", family);
  EXPECT_TRUE(j.ok());
  return j.ok() ? *j : nlohmann::json::object();
}

TEST(ConfigSpace, EveryDrawIsAConfigItsFamilyParsesAndBuilds) {
  ASSERT_GE(config_space_names().size(), 2u);
  for (const std::string& family : config_space_names()) {
    std::set<std::string> distinct;
    for (int seed = 1; seed <= 100; ++seed) {
      const nlohmann::json j = drawn(family, seed);
      auto config = parse_model_config(j, family);
      ASSERT_TRUE(config.ok()) << family << " " << seed << ": " << config.error().message();
      const Family& f = (*config)->family();
      ASSERT_NE(f.config_space(), nullptr);
      EXPECT_EQ(f.config_space()->family, family);
      EXPECT_FALSE(f.graphs(**config).empty());
      EXPECT_FALSE(f.param_specs(**config).empty());
      EXPECT_EQ(j.value("_twinpath_draw", ""), "random:" + family + ":" + std::to_string(seed));
      EXPECT_EQ(json_text(drawn(family, seed)), json_text(j)) << "the same seed, another draw";
      distinct.insert(json_text(j));
    }
    EXPECT_GE(distinct.size(), 90u) << family << ": 100 seeds drew few configs";
  }
}

// The draws reach the shapes fixed configs never have: odd and non-power-of-two group counts,
// one level and four, odd latent channels, the optional parts off.
TEST(ConfigSpace, AutoencoderKlDrawsCoverItsSpace) {
  std::set<int> groups, levels, latents;
  std::set<bool> attention;
  for (int seed = 1; seed <= 200; ++seed) {
    const nlohmann::json j = drawn("autoencoder_kl", seed);
    groups.insert(j["norm_num_groups"].get<int>());
    levels.insert(int(j["block_out_channels"].size()));
    latents.insert(j["latent_channels"].get<int>());
    attention.insert(j["mid_block_add_attention"].get<bool>());
    for (const auto& ch : j["block_out_channels"])
      EXPECT_EQ(ch.get<int>() % j["norm_num_groups"].get<int>(), 0);
  }
  EXPECT_TRUE(groups.count(3) && groups.count(5) && groups.count(1));
  EXPECT_TRUE(levels.count(1) && levels.count(4));
  EXPECT_TRUE(latents.count(1) && latents.count(5));
  EXPECT_EQ(attention.size(), 2u);
}

TEST(ConfigSpace, AutoencoderTinyDrawsCoverItsSpace) {
  std::set<int> widths, blocks, levels;
  for (int seed = 1; seed <= 200; ++seed) {
    const nlohmann::json j = drawn("autoencoder_tiny", seed);
    widths.insert(j["encoder_block_out_channels"][0].get<int>());
    levels.insert(int(j["num_encoder_blocks"].size()));
    for (const auto& n : j["num_decoder_blocks"]) blocks.insert(n.get<int>());
    EXPECT_EQ(j["decoder_block_out_channels"].size(), j["num_encoder_blocks"].size());
  }
  EXPECT_TRUE(widths.count(4) && widths.count(24) && widths.count(13));
  EXPECT_EQ(blocks, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(levels, (std::set<int>{1, 2, 3, 4}));
}

TEST(ConfigSpace, ANameThatDrawsNothingGetsASentence) {
  auto unknown = builtin_config_text("random:autoencoder_k:1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("did you mean autoencoder_kl"), std::string::npos)
      << unknown.error().message();
  for (const char* bad : {"random:autoencoder_kl:x", "random:autoencoder_kl", "random::3",
                          "random:autoencoder_kl:-1"}) {
    auto r = builtin_config_text(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("write random:FAMILY:SEED"), std::string::npos)
        << r.error().message();
  }
}

TEST(ConfigSpace, ASuiteLineSweepsDraws) {
  auto cases = expand_suite(
      "vae.decode model=random:autoencoder_kl:3..5,tiny-kl res=32x32 w=f16 a=f16 acc=f32", "t");
  ASSERT_TRUE(cases.ok()) << cases.error().message();
  std::vector<std::string> models;
  for (const Case& c : *cases) models.push_back(c.model);
  EXPECT_EQ(models, (std::vector<std::string>{"random:autoencoder_kl:3", "random:autoencoder_kl:4",
                                              "random:autoencoder_kl:5", "tiny-kl"}));
  auto weighted = expand_suite("vae.decode model=random:autoencoder_tiny:1..2@7 res=32x32", "t");
  ASSERT_TRUE(weighted.ok()) << weighted.error().message();
  EXPECT_EQ(weighted->back().model, "random:autoencoder_tiny:2@7");
  for (const char* bad : {"random:autoencoder_kl:5..3", "random:autoencoder_kl:1..x"}) {
    auto r = expand_suite(std::string("vae.decode model=") + bad + " res=32x32", "t");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("random:FAMILY:A..B"), std::string::npos)
        << r.error().message();
  }
}

}  // namespace
}  // namespace tp
