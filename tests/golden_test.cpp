// Our paths against diffusers' own outputs (tests/fixtures/golden, made by
// tools/make-golden-fixtures.sh): encode mean/logvar (or Tiny latents), decode and roundtrip.
#include <gtest/gtest.h>

#include <cstdio>

#include "harness/cli/paths.h"
#include "harness/models/model.h"
#include "tests/support/compare.h"
#include "tests/support/test_name.h"

namespace tp {
namespace {

struct GoldenCase {
  std::string model;
  std::string path;         // twinpath path name
  double max_rel_l2;        // against diffusers' float64 outputs
  std::string policy = {};  // compiled path only
  // A roundtrip carries the encoder's error through the decoder, which amplifies it: with
  // 16-bit storage it lands at 2-3x the decode error on these random-weight models.
  double roundtrip_factor = 1;
};

std::ostream& operator<<(std::ostream& os, const GoldenCase& c) {
  return os << c.model << " on " << c.path << (c.policy.empty() ? "" : " " + c.policy);
}

class GoldenTest : public ::testing::TestWithParam<GoldenCase> {};

std::string fixture_dir(const std::string& model) {
  return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden/" + model;
}

// Runs `pipeline` on `input_name` and compares each output against io[<prefix><stage>.<out>].
void check_pipeline(const Model& model, const SafetensorsFile& io, const PathChoice& path,
                    const std::string& p, const std::string& prefix, double max_rel_l2) {
  const std::string input_name = prefix + (p == "vae.decode" ? "latent" : "image");
  auto input = io.read(input_name);
  ASSERT_TRUE(input.ok()) << input.error().message();
  auto out = path.run(model, p, {{"input", input.value()}});
  ASSERT_TRUE(out.ok()) << out.error().message();
  const std::string stage = p.substr(4) + ".";  // vae.encode -> encode.
  for (const auto& [name, ours] : out.value()) {
    const std::string key = prefix + stage + name;
    auto golden = io.read(key);
    ASSERT_TRUE(golden.ok()) << golden.error().message();
    const double err = testing::relative_l2(ours.to(DType::kF64), golden.value());
    EXPECT_LE(err, max_rel_l2) << key << " via " << path.description;
    EXPECT_GT(testing::max_abs(golden.value()), 1e-3)
        << key << ": golden output is ~zero, it proves nothing";
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.3e", err);
    ::testing::Test::RecordProperty(key, figure);
  }
}

// Encode, decode and (KL) roundtrip of the fixture's <prefix>image / <prefix>latent.
void check_model(const GoldenCase& c, const TilingOptions& tiling, const std::string& prefix) {
  auto model = load_model(fixture_dir(c.model));
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto io = SafetensorsFile::open(fixture_dir(c.model) + "/io.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  PipelineOptions options;
  options.tiling = tiling;
  auto path = make_path(c.path, compiled, options);
  ASSERT_TRUE(path.ok()) << path.error().message();
  check_pipeline(model.value(), io.value(), path.value(), "vae.encode", prefix, c.max_rel_l2);
  check_pipeline(model.value(), io.value(), path.value(), "vae.decode", prefix, c.max_rel_l2);
  if (model->family().class_name() == "AutoencoderKL")
    check_pipeline(model.value(), io.value(), path.value(), "vae.roundtrip", prefix,
                   c.max_rel_l2 * c.roundtrip_factor);
}

TEST_P(GoldenTest, MatchesDiffusers) { check_model(GetParam(), TilingOptions{}, ""); }

// The bar: fp32 within 1e-5 relative L2 of diffusers' float64; fp64 tighter still.
// diffusers' float64 runs its attention softmax in float32 (torch 1.13, AttnProcessor), so
// 1e-7 is the floor the fp64 comparison can show; models without attention sit near 1e-15.
std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  for (const char* m : {"tiny-kl", "kl-3level", "kl-16lat-noquant", "tiny-taesd"}) {
    cases.push_back({m, "reference", 1e-5});
    cases.push_back({m, "reference:fp64", 1e-7});
#ifdef TWINPATH_HAVE_TORCH
    cases.push_back({m, "torch:fp64", 1e-7});
#endif
    // The compiled path's emulated kernels: the bars for f16 and bf16 storage.
    cases.push_back({m, "compiled:cpu", 1e-5, "w=f32,a=f32,acc=f32"});
    cases.push_back({m, "compiled:cpu", 5e-3, "w=f16,a=f16,acc=f32", 3});
    cases.push_back({m, "compiled:cpu", 3e-2, "w=bf16,a=bf16,acc=f32", 3});
  }
  return cases;
}

// diffusers' enable_tiling() (tiny-kl: 32 px tiles every 24, 4x3 tiles; tiny-taesd: its fixed
// 512 px tile): the reference's plain tiling and the compiled path's own.
class TiledGoldenTest : public GoldenTest {};

TEST_P(TiledGoldenTest, MatchesDiffusers) {
  check_model(GetParam(), TilingOptions{true, 0, 0}, "tiled.");
}

std::vector<GoldenCase> tiled_cases() {  // the models whose fixtures hold tiled outputs
  std::vector<GoldenCase> cases;
  for (const GoldenCase& c : golden_cases())
    if (c.model == "tiny-kl" || c.model == "tiny-taesd") cases.push_back(c);
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  return testing::test_name(info.param.model + "_" + info.param.path + "_" + info.param.policy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest, ::testing::ValuesIn(golden_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, TiledGoldenTest, ::testing::ValuesIn(tiled_cases()), case_name);

// UNet2DConditionModel fixtures (tests/fixtures/golden-unet, tools/make-unet-golden-fixtures.sh:
// diffusers 0.42.1 on PyPI's torch): one unet.step call with diffusers' argument names, against
// diffusers' float64 output. tiny-unet runs at an odd latent (15x17), unet-mixed is no built-in.
class UnetGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(UnetGoldenTest, MatchesDiffusers) {
  const GoldenCase& c = GetParam();
  const std::string dir =
      std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-unet/" + c.model;
  auto model = load_model(dir);
  ASSERT_TRUE(model.ok()) << model.error().message();
  ASSERT_EQ(model->family().class_name(), "UNet2DConditionModel");
  auto io = SafetensorsFile::open(dir + "/io.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  NamedTensors inputs;
  for (const char* name :
       {"sample", "timestep", "encoder_hidden_states", "text_embeds", "time_ids"})
    if (auto t = io->read(name); t.ok()) inputs.emplace_back(name, std::move(t).value());
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  auto path = make_path(c.path, compiled);
  ASSERT_TRUE(path.ok()) << path.error().message();
  auto out = path->run(*model, "unet.step", inputs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  auto golden = io->read("out.f64");
  ASSERT_TRUE(golden.ok()) << golden.error().message();
  const double err = testing::relative_l2(out->front().second.to(DType::kF64), *golden);
  EXPECT_LE(err, c.max_rel_l2) << c.model << " via " << path->description;
  EXPECT_GT(testing::max_abs(*golden), 1e-3) << "golden output is ~zero, it proves nothing";
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3e", err);
  RecordProperty("rel_l2", figure);
}

// Every path on one fixture: fp32 within 1e-5 of diffusers' float64 (the bar), fp64 within
// `fp64_bound`, and the compiled path's storage precision: a few unit roundoffs of f16 (4.9e-4)
// and bf16 (3.9e-3).
void add_every_path(std::vector<GoldenCase>& cases, const char* fixture, double fp64_bound) {
  cases.push_back({fixture, "reference", 1e-5});
  cases.push_back({fixture, "reference:fp64", fp64_bound});
#ifdef TWINPATH_HAVE_TORCH
  cases.push_back({fixture, "torch", 1e-5});
  cases.push_back({fixture, "torch:fp64", fp64_bound});
#endif
  cases.push_back({fixture, "compiled:cpu", 1e-5, "w=f32,a=f32,acc=f32"});
  cases.push_back({fixture, "compiled:cpu", 5e-3, "w=f16,a=f16,acc=f32"});
  cases.push_back({fixture, "compiled:cpu", 4e-2, "w=bf16,a=bf16,acc=f32"});
}

std::vector<GoldenCase> unet_cases() {
  std::vector<GoldenCase> cases;
  // fp64 closer: the float32 timestep sinusoid, which diffusers keeps in float64 too, is
  // reproduced exactly.
  for (const char* m : {"tiny-unet", "tiny-unet-xl", "unet-mixed"}) add_every_path(cases, m, 1e-7);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, UnetGoldenTest, ::testing::ValuesIn(unet_cases()), case_name);

// sdxl.denoise on tiny-unet-xl against StableDiffusionXLPipeline's loop (output_type="latent"):
// "guided" is 3 steps with guidance 5, "unguided" 2 steps without (the model field names which).
// diffusers' float64 run still rounds each Euler step to float32 (its scheduler upcasts to
// float32, not float64), so fp64 lands near 5e-8 of it, not closer.
class DenoiseGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(DenoiseGoldenTest, MatchesDiffusersPipeline) {
  const GoldenCase& c = GetParam();
  const std::string dir =
      std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-unet/tiny-unet-xl";
  auto model = load_model(dir);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto io = SafetensorsFile::open(dir + "/io_denoise.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  const bool guided = c.model == "guided";
  NamedTensors inputs;
  for (const char* name : {"latents", "prompt_embeds", "pooled_prompt_embeds",
                           "negative_prompt_embeds", "negative_pooled_prompt_embeds"})
    if (auto t = io->read(name); t.ok() && (guided || std::string(name).rfind("negative", 0)))
      inputs.emplace_back(name, std::move(t).value());
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  PipelineOptions options;
  options.values = {{"steps", guided ? "3" : "2"}, {"guidance", guided ? "5" : "1"}};
  auto path = make_path(c.path, compiled, options);
  ASSERT_TRUE(path.ok()) << path.error().message();
  auto out = path->run(*model, "sdxl.denoise", inputs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  auto golden = io->read("latents." + c.model + ".f64");
  ASSERT_TRUE(golden.ok()) << golden.error().message();
  const double err = testing::relative_l2(out->front().second.to(DType::kF64), *golden);
  EXPECT_LE(err, c.max_rel_l2) << c.model << " via " << path->description;
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3e", err);
  RecordProperty("rel_l2", figure);
}

std::vector<GoldenCase> denoise_cases() {
  std::vector<GoldenCase> cases;
  for (const char* v : {"guided", "unguided"}) add_every_path(cases, v, 2e-7);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DenoiseGoldenTest, ::testing::ValuesIn(denoise_cases()),
                         case_name);

// sdxl.base+refiner against diffusers' ensemble of expert denoisers: StableDiffusionXLPipeline
// with denoising_end 0.7, then StableDiffusionXLImg2ImgPipeline (requires_aesthetics_score) with
// denoising_start 0.7 from its latents, 6 steps, guidance 5, the refiner conditioned on the last
// 24 columns of prompt_embeds, one VAE (golden/tiny-kl) decoding both pipelines' latents.
class BaseRefinerGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(BaseRefinerGoldenTest, MatchesDiffusersPipelines) {
  const GoldenCase& c = GetParam();
  const std::string root = std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/";
  auto base = load_model(root + "golden-unet/tiny-unet-xl");
  auto refiner = load_model(root + "golden-unet/tiny-unet-xl-refiner");
  auto vae = load_model(root + "golden/tiny-kl");
  ASSERT_TRUE(base.ok() && refiner.ok() && vae.ok());
  auto io =
      SafetensorsFile::open(root + "golden-unet/tiny-unet-xl-refiner/io_base_refiner.safetensors");
  ASSERT_TRUE(io.ok()) << io.error().message();
  NamedTensors inputs;
  for (const char* name : {"latents", "prompt_embeds", "pooled_prompt_embeds",
                           "negative_prompt_embeds", "negative_pooled_prompt_embeds"})
    inputs.emplace_back(name, *io->read(name));
  CompiledOptions compiled;
  if (!c.policy.empty()) compiled.policy = c.policy;
  PipelineOptions options;
  options.values = {{"steps", "6"}, {"guidance", "5"}, {"split", "0.7"}};
  options.models = {{"vae", &*vae}, {"refiner", &*refiner}};
  auto path = make_path(c.path, compiled, options);
  ASSERT_TRUE(path.ok()) << path.error().message();
  auto out = path->run(*base, "sdxl.base+refiner", inputs);
  ASSERT_TRUE(out.ok()) << out.error().message();
  for (const char* name : {"base.latents", "base.sample", "sample"}) {
    const Tensor* got = find_tensor(*out, name);
    ASSERT_NE(got, nullptr) << name;
    auto golden = io->read(std::string(name) + ".f64");
    ASSERT_TRUE(golden.ok()) << golden.error().message();
    const double err = testing::relative_l2(got->to(DType::kF64), *golden);
    EXPECT_LE(err, c.max_rel_l2) << name << " via " << path->description;
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.3e", err);
    RecordProperty(std::string("rel_l2.") + name, figure);
  }
}

std::vector<GoldenCase> base_refiner_cases() {
  std::vector<GoldenCase> cases;
  add_every_path(cases, "base+refiner", 2e-7);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BaseRefinerGoldenTest, ::testing::ValuesIn(base_refiner_cases()),
                         case_name);

}  // namespace
}  // namespace tp
