// AutoencoderKLHunyuanVideo's tiling rule as the shared layers see it (through the family's
// hooks): the engage decision in time and in space, the blend bands across frames, sizes that
// do not step whole latents, the options on the command line and in case lines, and a wrong
// decision in both axes reported as the tiling check's failure (hv_golden_test.cpp compares
// the tiled outputs with diffusers').
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cases/case.h"
#include "harness/core/executor.h"
#include "harness/models/model.h"
#include "harness/runner/case_runner.h"
#include "tests/support/user_error.h"

namespace tp {
namespace {

using testing::expect_user_error;

std::shared_ptr<const ModelConfig> tiny_hv() {
  auto config =
      parse_model_config(nlohmann::json::parse(builtin_config_text("tiny-hv").value()), "tiny-hv");
  EXPECT_TRUE(config.ok());
  return *config;
}

TilingDecision decision(bool decode, Shape input, bool in_time, bool in_space) {
  TilingDecision d;
  d.decode = decode;
  d.input = std::move(input);
  d.framewise = in_time;
  d.engaged = in_space;
  return d;
}

// video-vae-facts 6.2: a decode tiles in time above 16 // 4 = 4 latent frames, an encode above
// 16 video frames; in space above min // 8 latents (decode) or min px (encode), strictly.
TEST(HvTiling, TheRuleTilesStrictlyAboveTheMinInEachAxis) {
  const auto config = tiny_hv();
  const Family& f = config->family();
  TilingOptions o;  // diffusers' defaults: framewise on, no spatial tiling
  EXPECT_EQ(f.check_tiling_decision(*config, o, decision(true, {1, 4, 4, 4, 4}, false, false)), "");
  EXPECT_EQ(f.check_tiling_decision(*config, o, decision(true, {1, 4, 5, 4, 4}, true, false)), "");
  EXPECT_EQ(f.check_tiling_decision(*config, o, decision(false, {1, 3, 17, 8, 8}, true, false)),
            "");
  const std::string late =
      f.check_tiling_decision(*config, o, decision(true, {1, 4, 5, 4, 4}, false, false));
  EXPECT_NE(late.find("did not tile the decode input [1, 4, 5, 4, 4] in time"), std::string::npos)
      << late;
  EXPECT_NE(late.find("above 4 latent frames) says it must tile"), std::string::npos) << late;
  o.framewise = false;
  EXPECT_NE(f.check_tiling_decision(*config, o, decision(false, {1, 3, 17, 8, 8}, true, false))
                .find("fits one tile"),
            std::string::npos);
  // Field report 4's widths at tile=64:48: 8 latents fit the 64 px min, 9 do not.
  TilingOptions spatial{true, 64, 48};
  EXPECT_EQ(f.check_tiling_decision(*config, spatial, decision(true, {1, 4, 2, 8, 9}, false, true)),
            "");
  const std::string early =
      f.check_tiling_decision(*config, spatial, decision(true, {1, 4, 2, 7, 8}, false, true));
  EXPECT_NE(early.find("tiled the decode input [1, 4, 2, 7, 8] in space"), std::string::npos)
      << early;
  EXPECT_NE(early.find("8 latent tile min in height or width) says it fits one tile"),
            std::string::npos)
      << early;
}

// 6 latent frames at 16:12: tile 0 decodes latents 0-4 (17 frames, keeps 13), tile 1 latents
// 3-5 (9 frames less the first: 8), whose first 4 blend with tile 0's last 4: frames 13-16.
TEST(HvTiling, TheBlendBandsRunAcrossTheBlendedFrames) {
  const auto config = tiny_hv();
  auto bands =
      config->family().seam_bands(*config, TilingOptions{}, "video.decode", {1, 4, 6, 2, 3});
  ASSERT_TRUE(bands.ok()) << bands.error().message();
  ASSERT_EQ(bands->frames.size(), 21u);
  for (std::size_t k = 0; k < 21; ++k) EXPECT_EQ(bands->frames[k], k >= 13 && k <= 16) << k;
  EXPECT_EQ(bands->rows, std::vector<bool>(16, false));
  EXPECT_EQ(bands->cols, std::vector<bool>(24, false));
  TilingOptions off;
  off.framewise = false;
  bands = config->family().seam_bands(*config, off, "video.decode", {1, 4, 6, 2, 3});
  ASSERT_TRUE(bands.ok());
  EXPECT_EQ(bands->frames, std::vector<bool>(21, false));
}

TEST(HvTiling, SizesThatDoNotStepWholeLatentsAreRefused) {
  const auto config = tiny_hv();
  const Family& f = config->family();
  auto bands = f.seam_bands(*config, TilingOptions{true, 30, 20}, "video.decode", {1, 4, 2, 8, 8});
  ASSERT_FALSE(bands.ok());
  EXPECT_NE(bands.error().message().find("tile 30:20 px does not step whole latents"),
            std::string::npos)
      << bands.error().message();
  TilingOptions frames;
  frames.frames_min = 10;
  frames.frames_stride = 6;
  bands = f.seam_bands(*config, frames, "video.decode", {1, 4, 2, 8, 8});
  ASSERT_FALSE(bands.ok());
  EXPECT_NE(bands.error().message().find("tile_frames 10:6 frames"), std::string::npos);
}

TEST(HvTiling, OptionsInTimeBelongToVideoPipelines) {
  EXPECT_FALSE(parse_case("video.decode framewise=off tile_frames=8:4").ok());
  EXPECT_FALSE(parse_case("video.decode tile_frames=8").ok());
  EXPECT_TRUE(parse_case("video.decode tile_frames=8:4 tiling=on tile=64:48").ok());
  expect_user_error(
      "run --case 'vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 "
      "framewise=off'",
      "vae.decode does not tile in time (video.encode, video.decode or "
      "video.roundtrip do)");
  expect_user_error(
      "exec --model tiny-kl --pipeline vae.decode --input x.npy --output y.npy "
      "--tile-min-frames 8 --framewise off",
      "size the tiling in time that --framewise off turns off");
  expect_user_error(
      "exec --model tiny-kl --pipeline vae.decode --input x.npy --output y.npy "
      "--framewise sometimes",
      "--framewise sometimes is unknown");
}

// A compiled path that tiles where the rule does not, in space inside temporal tiles: its tile
// calls have other shapes than the reference's calls of the same name, which are not compared
// (nor run alone), and the check names the axis.
TEST(HvTiling, AWrongDecisionInsideTemporalTilesFailsNamingTheAxis) {
  ModelCache models;
  const Case c = parse_case(
                     "video.decode model=tiny-hv res=64x224 w=f16 a=f16 acc=f32 frames=6 "
                     "tiling=on inject=tile-threshold-from-stride")
                     .value();
  const CaseResult r = run_case(c, RunOptions{}, models);
  EXPECT_EQ(r.outcome, Outcome::kFailed) << r.reason;
  EXPECT_NE(r.reason.find("tiled the decode input [1, 4, 6, 8, 28] in space"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("2 frame tiles"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace tp
