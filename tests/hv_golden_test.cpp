// AutoencoderKLHunyuanVideo against diffusers' own outputs (tests/fixtures/golden-hv, made by
// tools/make-hv-golden-fixtures.sh), untiled and not framewise, on every path: the encoder's
// posterior (mean, logvar) and the decoder's video, diffusers' float64 run as the oracle. The
// fixtures go beyond the built-in tiny-hv: 3 and 5 levels, two resnets per level, odd channels
// per group, no mid-block attention, batch 2, a frame count that is not 4k+1, a still image.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "harness/cli/paths.h"
#include "harness/core/format.h"
#include "harness/models/model.h"
#include "tests/support/compare.h"
#include "tests/support/test_name.h"

namespace tp {
namespace {

const char* const kFixtures[] = {"tiny-hv", "hv-three-levels", "hv-five-levels"};

std::string fixture(const std::string& name) {
  return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-hv/" + name;
}

// The graphs read exactly the checkpoint's parameters, and the full model's are the 248 keys and
// shapes of diffusers' default config (../shared/docs/reference/hunyuanvideo-vae-keys.txt, kept in
// tests/fixtures/keys).
TEST(HunyuanVideoVaeGraph, ReadsExactlyTheCheckpointsParameters) {
  for (const char* name : kFixtures) {
    auto model = load_model(fixture(name));
    ASSERT_TRUE(model.ok()) << model.error().message();
    std::set<std::string> graph_keys, checkpoint_keys;
    for (const ParamSpec& p : model->family().param_specs(*model->config)) graph_keys.insert(p.key);
    for (const auto& [key, t] : model->weights) checkpoint_keys.insert(key);
    EXPECT_EQ(graph_keys, checkpoint_keys) << name;
  }
  auto full = builtin_config_text("hunyuan-video");
  ASSERT_TRUE(full.ok());
  auto config = parse_model_config(nlohmann::json::parse(*full), "hunyuan-video");
  ASSERT_TRUE(config.ok()) << config.error().message();
  std::ifstream keys(std::string(TWINPATH_SOURCE_DIR) +
                     "/tests/fixtures/keys/hunyuanvideo-vae-keys.txt");
  ASSERT_TRUE(keys) << "the key list is missing";
  std::set<std::string> want, got;
  for (std::string line; std::getline(keys, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.find(' ');
    want.insert(line.substr(0, space) + " " + line.substr(line.find('[', space)));
  }
  for (const ParamSpec& p : (*config)->family().param_specs(**config))
    got.insert(p.key + " " + shape_string(p.shape));
  EXPECT_EQ(want.size(), 248u);
  EXPECT_EQ(got, want);
}

// Each of diffusers' outputs (named as the pipeline's) against ours within `bound` relative L2;
// the figures go to the test's XML.
void expect_outputs_match(const NamedTensors& out, const NamedTensors& goldens, double bound,
                          const std::string& path) {
  std::string figures;
  for (const auto& [name, golden] : goldens) {
    ASSERT_GT(testing::max_abs(golden), 1e-3) << "golden output is ~zero, it proves nothing";
    const Tensor* got = find_tensor(out, name);
    ASSERT_TRUE(got) << name;
    ASSERT_EQ(got->shape(), golden.shape()) << name;
    const double err = testing::relative_l2(got->to(DType::kF64), golden.to(DType::kF64));
    EXPECT_LE(err, bound) << name << " via " << path;
    figures += std::string(figures.empty() ? "" : " ") + name + " " + printf_numbers("%.3e", err);
  }
  ::testing::Test::RecordProperty("rel_l2", figures);
}

struct HvGoldenCase {
  std::string model, pipeline, path, policy;
  double max_rel_l2;  // against diffusers' float64 output
};

std::ostream& operator<<(std::ostream& os, const HvGoldenCase& c) {
  return os << c.model << " " << c.pipeline << " on " << c.path << " " << c.policy;
}

class HvGolden : public ::testing::TestWithParam<HvGoldenCase> {};

TEST_P(HvGolden, MatchesDiffusers) {
  const HvGoldenCase& c = GetParam();
  auto model = load_model(fixture(c.model));
  ASSERT_TRUE(model.ok()) << model.error().message();
  ASSERT_EQ(model->family().class_name(), "AutoencoderKLHunyuanVideo");
  auto io = SafetensorsFile::open(fixture(c.model) + "/io.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  const bool decode = c.pipeline == "video.decode";
  const char* input = decode ? "latents" : "sample";
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  auto path = make_path(c.path, compiled);
  ASSERT_TRUE(path.ok()) << path.error().message();
  auto out = path->run(*model, c.pipeline, {{input, io->read(input).value()}});
  ASSERT_TRUE(out.ok()) << out.error().message();
  NamedTensors goldens;
  for (const char* name :
       decode ? std::vector<const char*>{"sample"} : std::vector<const char*>{"mean", "logvar"})
    goldens.emplace_back(name, io->read(std::string(decode ? "decoded" : name) + ".f64").value());
  expect_outputs_match(*out, goldens, c.max_rel_l2, path->description);
}

std::vector<HvGoldenCase> hv_cases() {
  std::vector<HvGoldenCase> cases;
  for (const char* m : kFixtures)
    for (const char* p : {"video.encode", "video.decode"}) {
      cases.push_back({m, p, "reference", "", 1e-5});
      cases.push_back({m, p, "reference:fp64", "", 1e-6});
#ifdef TWINPATH_HAVE_TORCH
      cases.push_back({m, p, "torch", "", 1e-5});
      cases.push_back({m, p, "torch:fp64", "", 1e-6});
#endif
      cases.push_back({m, p, "compiled:cpu", "w=f32,a=f32,acc=f32", 1e-5});
      cases.push_back({m, p, "compiled:cpu", "w=f16,a=f16,acc=f32", 1e-2});
      cases.push_back({m, p, "compiled:cpu", "w=bf16,a=bf16,acc=f32", 6e-2});
    }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<HvGoldenCase>& info) {
  return testing::test_name(info.param.model + "_" + info.param.pipeline + "_" + info.param.path +
                            "_" + info.param.policy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HvGolden, ::testing::ValuesIn(hv_cases()), case_name);

// Tiled in space, in time and both (tiled.json beside each fixture lists the runs and diffusers'
// options): every path against diffusers' own tiled output, never the untiled one (tiling
// changes the output by design, video-vae-facts 8). The reference paths run the plain tiler,
// the compiled path the streamed one.
struct HvTiledCase {
  std::string model, variant, path, policy;
  double max_rel_l2;
};

std::ostream& operator<<(std::ostream& os, const HvTiledCase& c) {
  return os << c.model << " " << c.variant << " on " << c.path << " " << c.policy;
}

nlohmann::json tiled_plan(const std::string& model) {
  std::ifstream in(fixture(model) + "/tiled.json");
  return nlohmann::json::parse(in);
}

class HvTiledGolden : public ::testing::TestWithParam<HvTiledCase> {};

TEST_P(HvTiledGolden, MatchesDiffusersTiledOutput) {
  const HvTiledCase& c = GetParam();
  auto model = load_model(fixture(c.model));
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto io = SafetensorsFile::open(fixture(c.model) + "/io.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  nlohmann::json run;
  for (const nlohmann::json& r : tiled_plan(c.model))
    if (r["variant"] == c.variant) run = r;
  ASSERT_FALSE(run.is_null()) << c.variant << " is not in tiled.json";
  PipelineOptions options;
  options.tiling = TilingOptions{run["tiling"].get<bool>(),
                                 run["tile"][0].get<int64_t>(),
                                 run["tile"][1].get<int64_t>(),
                                 run["framewise"].get<bool>(),
                                 run["tile_frames"][0].get<int64_t>(),
                                 run["tile_frames"][1].get<int64_t>()};
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  auto path = make_path(c.path, compiled, options);
  ASSERT_TRUE(path.ok()) << path.error().message();
  const std::string key = "tiled." + c.variant + ".";
  const std::string pipeline = run["pipeline"];
  auto out = path->run(*model, pipeline, {{"input", io->read(key + "input").value()}});
  ASSERT_TRUE(out.ok()) << out.error().message();
  NamedTensors goldens;
  for (const std::string name : run["outputs"])
    goldens.emplace_back(name, io->read(key + name).value().to(DType::kF64));
  expect_outputs_match(*out, goldens, c.max_rel_l2, path->description);
}

std::vector<HvTiledCase> tiled_cases() {
  std::vector<HvTiledCase> cases;
  for (const char* m : kFixtures)
    for (const nlohmann::json& r : tiled_plan(m)) {
      const std::string v = r["variant"];
      cases.push_back({m, v, "reference", "", 1e-5});
      cases.push_back({m, v, "reference:fp64", "", 1e-6});
      cases.push_back({m, v, "compiled:cpu", "w=f32,a=f32,acc=f32", 1e-5});
      cases.push_back({m, v, "compiled:cpu", "w=f16,a=f16,acc=f32", 1e-2});
    }
  return cases;
}

std::string tiled_name(const ::testing::TestParamInfo<HvTiledCase>& info) {
  return testing::test_name(info.param.model + "_" + info.param.variant + "_" + info.param.path +
                            "_" + info.param.policy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HvTiledGolden, ::testing::ValuesIn(tiled_cases()), tiled_name);

}  // namespace
}  // namespace tp
