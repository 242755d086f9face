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
  std::string figures;
  for (const char* name :
       decode ? std::vector<const char*>{"sample"} : std::vector<const char*>{"mean", "logvar"}) {
    const Tensor golden = io->read(std::string(decode ? "decoded" : name) + ".f64").value();
    ASSERT_GT(testing::max_abs(golden), 1e-3) << "golden output is ~zero, it proves nothing";
    const Tensor* got = find_tensor(*out, name);
    ASSERT_TRUE(got) << name;
    ASSERT_EQ(got->shape(), golden.shape()) << name;
    const double err = testing::relative_l2(got->to(DType::kF64), golden);
    EXPECT_LE(err, c.max_rel_l2) << c << ": " << name << " via " << path->description;
    figures += std::string(figures.empty() ? "" : " ") + name + " " + printf_numbers("%.3e", err);
  }
  RecordProperty("rel_l2", figures);
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

}  // namespace
}  // namespace tp
