// The reference against diffusers on drawn configs (issue 43; tests/fixtures/golden-drawn, made
// by tools/make-drawn-golden-fixtures.sh): each fixture file names a draw, FAMILY-SEED, whose
// model `model init --random FAMILY:SEED` wrote and diffusers loaded with from_pretrained; the
// test draws the same model again (the weights are twinpath's, seed 0) and compares the fp32
// and fp64 references' outputs (a VAE's encode and decode, a video VAE's untiled, a
// transformer's or a UNet's one call) with
// diffusers' float64 outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "harness/cli/paths.h"
#include "harness/models/model.h"
#include "tests/support/compare.h"

namespace tp {
namespace {

struct Draw {
  std::string file, family, seed;
};

std::ostream& operator<<(std::ostream& os, const Draw& d) { return os << d.file; }

std::vector<Draw> draws() {
  const std::filesystem::path dir =
      std::filesystem::path(TWINPATH_SOURCE_DIR) / "tests/fixtures/golden-drawn";
  std::vector<Draw> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    const std::size_t dash = stem.rfind('-');
    out.push_back({entry.path().string(), stem.substr(0, dash), stem.substr(dash + 1)});
  }
  std::sort(out.begin(), out.end(), [](const Draw& a, const Draw& b) { return a.file < b.file; });
  return out;
}

class DrawnGoldenTest : public ::testing::TestWithParam<Draw> {};

// The calls a family's fixtures hold: each pipeline, and its inputs as the fixture names them and
// as the pipeline takes them. An output `sample` of `vae.decode` is the fixture's decode.sample.
struct FixtureCall {
  std::string pipeline;
  std::vector<std::pair<std::string, std::string>> inputs;
};

std::vector<FixtureCall> fixture_calls(const std::string& family) {
  if (family == "wan_transformer_3d")
    return {{"wan.step",
             {{"hidden_states", "hidden_states"},
              {"timestep", "timestep"},
              {"encoder_hidden_states", "encoder_hidden_states"}}}};
  if (family == "unet_2d_condition")  // text_embeds and time_ids where the draw has text_time
    return {{"unet.step",
             {{"sample", "sample"},
              {"timestep", "timestep"},
              {"encoder_hidden_states", "encoder_hidden_states"},
              {"text_embeds", "text_embeds"},
              {"time_ids", "time_ids"}}}};
  if (family == "autoencoder_kl_hunyuan_video")
    return {{"video.encode", {{"video", "sample"}}}, {"video.decode", {{"latent", "latents"}}}};
  return {{"vae.encode", {{"image", "input"}}}, {"vae.decode", {{"latent", "input"}}}};
}

// fp32 within the 1e-5 of diffusers' float64; fp64 within the fixture's float32
// rounding of it.
TEST_P(DrawnGoldenTest, ReferenceMatchesDiffusers) {
  const Draw& d = GetParam();
  auto model = make_model("random:" + d.family + ":" + d.seed, 0);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto io = SafetensorsFile::open(d.file);
  ASSERT_TRUE(io.ok()) << io.error().message();
  std::map<std::string, double> worst;  // per path
  for (const auto& [path_name, bound] :
       std::vector<std::pair<std::string, double>>{{"reference", 1e-5}, {"reference:fp64", 1e-6}}) {
    auto path = make_path(path_name, CompiledOptions{}, PipelineOptions{});
    ASSERT_TRUE(path.ok()) << path.error().message();
    for (const FixtureCall& call : fixture_calls(d.family)) {
      NamedTensors inputs;
      for (const auto& [fixture_name, input_name] : call.inputs) {
        if (fixture_name == "text_embeds" || fixture_name == "time_ids")
          if (!io->find(fixture_name)) continue;  // a UNet without text_time
        auto input = io->read(fixture_name);
        ASSERT_TRUE(input.ok()) << input.error().message();
        inputs.emplace_back(input_name, *input);
      }
      const std::string& pipeline = call.pipeline;
      auto out = path->run(*model, pipeline, inputs);
      ASSERT_TRUE(out.ok()) << d.file << " " << pipeline << ": " << out.error().message();
      for (const auto& [name, ours] : *out) {
        const std::string key = pipeline.substr(pipeline.find('.') + 1) + "." + name;
        auto golden = io->read(key);
        ASSERT_TRUE(golden.ok()) << d.file << ": " << golden.error().message();
        const double err = testing::relative_l2(ours.to(DType::kF64), *golden);
        EXPECT_LE(err, bound) << d.file << " " << key << " via " << path_name;
        worst[path_name] = std::max(worst[path_name], err);
        EXPECT_GT(testing::max_abs(*golden), 1e-3) << d.file << " " << key << " is ~zero";
      }
    }
  }
  std::printf("%s-%s: worst rel L2 fp32 %.3g, fp64 %.3g\n", d.family.c_str(), d.seed.c_str(),
              worst["reference"], worst["reference:fp64"]);
}

INSTANTIATE_TEST_SUITE_P(Draws, DrawnGoldenTest, ::testing::ValuesIn(draws()),
                         [](const ::testing::TestParamInfo<Draw>& info) {
                           std::string name = info.param.family + "_" + info.param.seed;
                           return name;
                         });

TEST(DrawnGolden, EveryFamilyWithASpaceHasTwentyDraws) {
  std::map<std::string, int> per_family;
  for (const Draw& d : draws()) ++per_family[d.family];
  for (const std::string& family : config_space_names())
    EXPECT_GE(per_family[family], 20) << family;
}

}  // namespace
}  // namespace tp
