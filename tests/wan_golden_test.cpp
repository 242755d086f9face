// WanTransformer3DModel against diffusers' own outputs (tests/fixtures/golden-wan, made by
// tools/make-wan-golden-fixtures.sh), on every path. out.f64 is diffusers' float64 call, which
// keeps its float32 casts (the LayerNorm inputs, the sinusoid, the RoPE tables, temb.float()):
// a pure float64 computation differs from it by ~1e-7 (dit-facts 5). out.bf16 is diffusers'
// bfloat16 model, out.layerwise the same with enable_layerwise_casting(float8_e4m3fn): the
// compiled path's bf16 and cast=layerwise errors may be at most 1.5 times diffusers' own.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/cli/paths.h"
#include "harness/models/model.h"
#include "harness/models/wan_transformer_3d/wan_config.h"
#include "tests/support/compare.h"
#include "tests/support/test_name.h"

namespace tp {
namespace {

const char* const kFixtures[] = {"tiny-wan", "wan-odd-patch", "wan-temporal-patch"};

std::string fixture(const std::string& name) {
  return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-wan/" + name;
}

// The graph reads exactly the checkpoint's parameters, which diffusers wrote in the order of
// wan_param_specs.
TEST(WanGraph, ReadsExactlyTheCheckpointsParameters) {
  for (const char* name : kFixtures) {
    std::ifstream in(fixture(name) + "/config.json");
    auto config = parse_wan_config(nlohmann::json::parse(in), name);
    ASSERT_TRUE(config.ok()) << config.error().message();
    std::set<std::string> graph_keys, spec_keys;
    for (const ParamSpec& p : build_wan_graph(*config).params) graph_keys.insert(p.key);
    for (const ParamSpec& p : wan_param_specs(*config)) spec_keys.insert(p.key);
    EXPECT_EQ(graph_keys, spec_keys) << name;
  }
}

// frames= sets a generated input's latent frames (default 3); a count out of range is refused
// with the syntax.
TEST(WanInputs, FramesOptionSetsTheLatentFrames) {
  auto model = load_model(fixture("tiny-wan"));
  ASSERT_TRUE(model.ok()) << model.error().message();
  const Family& family = model->family();
  OptionValues options;
  ASSERT_TRUE(set_pipeline_option(options, "wan.step", "frames", "5", "frames=").ok());
  auto shape = family.input_shape(*model->config, "wan.step", 48, 64, options);
  ASSERT_TRUE(shape.ok()) << shape.error().message();
  EXPECT_EQ(*shape, (Shape{1, 16, 5, 6, 8}));
  EXPECT_EQ(family.input_shape(*model->config, "wan.step", 48, 64, {}).value(),
            (Shape{1, 16, 3, 6, 8}));
  InputRequest r;
  r.pipeline = "wan.denoise";
  r.height = 48;
  r.width = 64;
  r.options = options;
  auto inputs = family.generate_inputs(*model, r, {});
  ASSERT_TRUE(inputs.ok()) << inputs.error().message();
  EXPECT_EQ(inputs->front().second.shape(), (Shape{1, 16, 5, 6, 8}));
  const Status zero = set_pipeline_option(options, "wan.step", "frames", "0", "frames=");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message().find("frames=N"), std::string::npos) << zero.error().message();
}

struct WanGoldenCase {
  std::string model, path, policy;
  double max_rel_l2;  // against out.f64; with `relative_to`, a factor on diffusers' own error
  std::string relative_to = "";  // out.bf16 or out.layerwise: diffusers' own low-precision output
};

std::ostream& operator<<(std::ostream& os, const WanGoldenCase& c) {
  return os << c.model << " on " << c.path << " " << c.policy;
}

class WanGolden : public ::testing::TestWithParam<WanGoldenCase> {};

TEST_P(WanGolden, MatchesDiffusers) {
  const WanGoldenCase& c = GetParam();
  auto model = load_model(fixture(c.model));
  ASSERT_TRUE(model.ok()) << model.error().message();
  ASSERT_EQ(model->family().class_name(), "WanTransformer3DModel");
  auto io = SafetensorsFile::open(fixture(c.model) + "/io.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  NamedTensors inputs;
  for (const char* name : {"hidden_states", "timestep", "encoder_hidden_states"})
    inputs.emplace_back(name, io->read(name).value());
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  auto path = make_path(c.path, compiled);
  ASSERT_TRUE(path.ok()) << path.error().message();
  auto out = path->run(*model, "wan.step", inputs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  const Tensor golden = io->read("out.f64").value();
  ASSERT_GT(testing::max_abs(golden), 1e-3) << "golden output is ~zero, it proves nothing";
  ASSERT_EQ(out->front().second.shape(), golden.shape());
  const double err = testing::relative_l2(out->front().second.to(DType::kF64), golden);
  double bound = c.max_rel_l2;
  if (!c.relative_to.empty()) {
    const double theirs =
        testing::relative_l2(io->read(c.relative_to).value().to(DType::kF64), golden);
    bound *= theirs;
    RecordProperty("diffusers_rel_l2", std::to_string(theirs));
  }
  EXPECT_LE(err, bound) << c << " via " << path->description;
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3e", err);
  RecordProperty("rel_l2", figure);
}

std::vector<WanGoldenCase> wan_cases() {
  std::vector<WanGoldenCase> cases;
  for (const char* m : kFixtures) {
    cases.push_back({m, "reference", "", 1e-5});
    cases.push_back({m, "reference:fp64", "", 1e-6});
#ifdef TWINPATH_HAVE_TORCH
    cases.push_back({m, "torch", "", 1e-5});
    cases.push_back({m, "torch:fp64", "", 1e-6});
#endif
    cases.push_back({m, "compiled:cpu", "w=f32,a=f32,acc=f32", 1e-5});
    cases.push_back({m, "compiled:cpu", "w=f16,a=f16,acc=f32", 5e-3});
    cases.push_back({m, "compiled:cpu", "w=bf16,a=bf16,acc=f32", 1.5, "out.bf16"});
    cases.push_back(
        {m, "compiled:cpu", "w=f8e4m3,a=bf16,acc=f32,cast=layerwise", 1.5, "out.layerwise"});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<WanGoldenCase>& info) {
  return testing::test_name(info.param.model + "_" + info.param.path + "_" + info.param.policy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WanGolden, ::testing::ValuesIn(wan_cases()), case_name);

// wan.denoise on tiny-wan against WanPipeline's loop (FlowMatchEulerDiscreteScheduler with
// shift 3, output_type="latent"): "guided" is 3 steps with guidance 5, "unguided" 2 steps
// without. diffusers' float64 run still rounds the latents to float32 at each step (the
// scheduler's step upcasts to float32, not float64).
class WanDenoiseGolden : public ::testing::TestWithParam<WanGoldenCase> {};

TEST_P(WanDenoiseGolden, MatchesDiffusersPipeline) {
  const WanGoldenCase& c = GetParam();
  const bool guided = c.model == "guided";
  auto model = load_model(fixture("tiny-wan"));
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto io = SafetensorsFile::open(fixture("tiny-wan") + "/io_denoise.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  NamedTensors inputs;
  for (const char* name : {"latents", "prompt_embeds", "negative_prompt_embeds"})
    if (guided || std::string(name).rfind("negative", 0))
      inputs.emplace_back(name, io->read(name).value());
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  PipelineOptions options;
  options.values = {{"steps", guided ? "3" : "2"}, {"guidance", guided ? "5" : "1"}};
  auto path = make_path(c.path, compiled, options);
  ASSERT_TRUE(path.ok()) << path.error().message();
  auto out = path->run(*model, "wan.denoise", inputs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  const Tensor golden = io->read("latents." + c.model + ".f64").value();
  ASSERT_EQ(out->front().second.shape(), golden.shape());
  const double err = testing::relative_l2(out->front().second.to(DType::kF64), golden);
  EXPECT_LE(err, c.max_rel_l2) << c << " via " << path->description;
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3e", err);
  RecordProperty("rel_l2", figure);
}

std::vector<WanGoldenCase> denoise_cases() {
  std::vector<WanGoldenCase> cases;
  for (const char* v : {"guided", "unguided"}) {
    cases.push_back({v, "reference", "", 1e-5});
    cases.push_back({v, "reference:fp64", "", 1e-6});
#ifdef TWINPATH_HAVE_TORCH
    cases.push_back({v, "torch", "", 1e-5});
#endif
    cases.push_back({v, "compiled:cpu", "w=f32,a=f32,acc=f32", 1e-5});
    cases.push_back({v, "compiled:cpu", "w=bf16,a=bf16,acc=f32", 4e-2});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WanDenoiseGolden, ::testing::ValuesIn(denoise_cases()),
                         case_name);

}  // namespace
}  // namespace tp
