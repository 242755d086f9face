// The model-family registry: a family defined inside tests/ (tests/toy_family) runs end to end
// through `twinpath run` (in process) with one registration line, and the built-in families are
// found through the registry alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "cases/tiling_points.h"
#include "harness/cli/commands.h"
#include "harness/models/model.h"
#include "harness/runner/runs.h"
#include "reports/h5_report.h"
#include "tests/toy_family/toy_family.h"

namespace tp {
namespace {

class FamilyRegistry : public ::testing::Test {
 protected:
  void SetUp() override { register_family(testing::toy_family()); }  // the one line
};

TEST_F(FamilyRegistry, AToyFamilyRunsThroughTwinpathRun) {
  const std::string dir = ::testing::TempDir() + "/family_registry";
  std::filesystem::create_directories(dir);
  RunCommandOptions o;
  o.cases = {"toy.forward model=tiny-toy res=16x16 w=f16 a=f16 acc=f32",
             "toy.forward model=tiny-toy res=24x20 w=f16 a=f16 acc=f32",
             "toy.forward model=tiny-toy res=16x16 w=bf16 a=bf16 acc=f32 keep=conv_out",
             "toy.tokens model=tiny-toy res=6x5 w=f16 a=f16 acc=f32",
             "toy.tokens model=tiny-toy res=4x4 w=bf16 a=bf16 acc=f32 keep=attn1*",
             "toy.tokens model=tiny-toy res=4x6 w=f16 a=f16 acc=f32 reload=on shapes=bucket:8"};
  o.report = dir + "/toy.h5";
  o.junit = dir + "/toy.xml";
  auto code = run_command(o, "twinpath run (family_registry_test)");
  ASSERT_TRUE(code.ok()) << code.error().message();
  EXPECT_EQ(*code, 0);
  auto report = read_h5_report(o.report);
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_EQ(report->cases.size(), 6u);
  for (const CaseResult& r : report->cases) {
    EXPECT_EQ(r.outcome, Outcome::kPassed) << r.id << ": " << r.reason;
    // Every fused group of the toy graphs is a checkpoint, named by its module path, with local
    // error; the pipeline output comes last. In the tokens graph the attention ends its group
    // with the residual and the GELU after it (epilogues), stored as ff.act.
    const bool tokens = r.id.rfind("toy.tokens", 0) == 0;
    const std::string first = tokens ? "proj_in" : "conv_in",
                      graph = tokens ? "toy.transformer" : "toy.net";
    bool found = false, block = false;
    for (const CheckpointRecord& c : r.checkpoints) {
      found = found || (c.name == first && c.graph == graph && c.has_local);
      block = block || (tokens ? c.name == "ff.act" : c.name.rfind("block", 0) == 0);
    }
    EXPECT_TRUE(found && block) << r.id;
    ASSERT_FALSE(r.checkpoints.empty());
    EXPECT_EQ(r.checkpoints.back().name, tokens ? "output:tokens" : "output:sample");
    EXPECT_GT(r.checkpoints.back().accumulated.rel_l2, 0) << r.id << ": f16 must differ";
  }
}

// Runs one case line through `twinpath run` (in process), expecting exit code 1 (it fails),
// and reads its result back from the report.
void run_failing_case(const std::string& line, const std::string& report_name, CaseResult& out) {
  RunCommandOptions o;
  o.cases = {line};
  o.report = ::testing::TempDir() + "/" + report_name;
  auto code = run_command(o, "twinpath run (family_registry_test)");
  ASSERT_TRUE(code.ok()) << code.error().message();
  EXPECT_EQ(*code, 1);
  auto report = read_h5_report(o.report);
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_EQ(report->cases.size(), 1u);
  out = report->cases[0];
}

TEST_F(FamilyRegistry, AToyOverflowIsCaughtAndTracedToItsLayer) {
  CaseResult r;
  ASSERT_NO_FATAL_FAILURE(
      run_failing_case("toy.forward model=tiny-toy res=16x16 w=f16 a=f16 acc=f32 boost=conv_in*1e6",
                       "family_registry_fault.h5", r));
  EXPECT_EQ(r.outcome, Outcome::kFailed) << r.reason;
  EXPECT_TRUE(r.provenance.found) << r.reason;
  EXPECT_EQ(r.provenance.checkpoint.rfind("conv_in", 0), 0u) << r.provenance.checkpoint;
}

// The same on the N-d ops: an f16 overflow in the transformer's first projection is traced to
// that layer by replaying its group op by op.
TEST_F(FamilyRegistry, AnNdOverflowIsTracedToItsLayer) {
  CaseResult r;
  ASSERT_NO_FATAL_FAILURE(
      run_failing_case("toy.tokens model=tiny-toy res=4x4 w=f16 a=f16 acc=f32 boost=proj_in*1e6",
                       "family_registry_nd_fault.h5", r));
  EXPECT_EQ(r.outcome, Outcome::kFailed) << r.reason;
  EXPECT_TRUE(r.provenance.found) << r.reason;
  EXPECT_EQ(r.provenance.checkpoint, "proj_in") << r.reason;
}

// A family's own option and tiling rule reach the case language, `cases options`, res=tiling,
// the run and its tiling check through the registry line alone: toy.forward's gain= and its
// 16-pixel tiles.
TEST_F(FamilyRegistry, AFamilysOptionAndTilingRuleReachTheWholeHarness) {
  auto gained = parse_case("toy.forward model=tiny-toy res=24x20 gain=4");
  ASSERT_TRUE(gained.ok()) << gained.error().message();
  EXPECT_EQ(gained->id(), "toy.forward model=tiny-toy res=24x20 w=f16 a=f16 acc=f32 gain=4");
  EXPECT_EQ(parse_case("toy.forward model=tiny-toy gain=1")->id(),
            "toy.forward model=tiny-toy res=64x64 w=f16 a=f16 acc=f32");  // the default: left out
  auto other = parse_case("toy.tokens model=tiny-toy gain=2");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find(
                "gain= is an option of toy.forward (the input is multiplied by G before the "
                "network); toy.tokens does not take it: drop it"),
            std::string::npos)
      << other.error().message();
  EXPECT_NE(case_options_help().find("Options of ToyConvNet's pipelines:\n  gain=G"),
            std::string::npos)
      << case_options_help();
  auto tokens_tiled = parse_case("toy.tokens model=tiny-toy res=32x32 tiling=on");
  ASSERT_TRUE(tokens_tiled.ok());
  EXPECT_EQ(tiling_points(*tokens_tiled).error().message(),
            "res=tiling: ToyConvNet does not tile toy.tokens");
  auto points = tiling_points(*parse_case("toy.forward model=tiny-toy tiling=on"));
  ASSERT_TRUE(points.ok()) << points.error().message();
  EXPECT_EQ(points->size(), 7u);

  RunCommandOptions o;
  o.cases = {"toy.forward model=tiny-toy res=24x20 w=f16 a=f16 acc=f32 gain=4",
             "toy.forward model=tiny-toy res=16x16 w=f16 a=f16 acc=f32",
             "toy.forward model=tiny-toy res=40x36 w=f16 a=f16 acc=f32 tiling=on",
             "toy.forward model=tiny-toy res=12x16 w=f16 a=f16 acc=f32 tiling=on"};
  o.report = ::testing::TempDir() + "/family_option_tiling.h5";
  auto code = run_command(o, "twinpath run (family_registry_test)");
  ASSERT_TRUE(code.ok()) << code.error().message();
  EXPECT_EQ(*code, 0);
  auto report = read_h5_report(o.report);
  ASSERT_TRUE(report.ok()) << report.error().message();
  ASSERT_EQ(report->cases.size(), 4u);
  for (const CaseResult& r : report->cases) EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  // gain=4 reaches the pipeline: the reference output is larger than at the default gain.
  auto output_max = [](const CaseResult& r) {
    return r.checkpoints.back().accumulated.want_max_abs;
  };
  EXPECT_GT(output_max(report->cases[0]), 2 * output_max(report->cases[1]));
  // The tiled case crosses tile borders: its seams and interiors are measured apart; the one
  // inside one tile has no seam.
  auto named = [](const CaseResult& r, const std::string& prefix) {
    for (const CheckpointRecord& c : r.checkpoints)
      if (c.name.rfind(prefix, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(named(report->cases[2], "seam:sample") && named(report->cases[2], "interior:sample"));
  EXPECT_FALSE(named(report->cases[3], "seam:sample"));
  EXPECT_TRUE(named(report->cases[3], "interior:sample"));
}

// A descriptor is data the harness trusts: every built-in pipeline, run on the reference, returns
// exactly the outputs its descriptor names, in order.
TEST_F(FamilyRegistry, EveryDescriptorNamesTheOutputsItsPipelineReturns) {
  const std::vector<std::string> lines = {
      "vae.encode model=tiny-kl res=32x32",
      "vae.decode model=tiny-kl res=32x32",
      "vae.roundtrip model=tiny-kl res=32x32",
      "vae.encode model=tiny-taesd res=32x32",
      "vae.roundtrip model=tiny-taesd res=32x32",
      "unet.step model=tiny-unet-xl res=64x64",
      "sdxl.denoise model=tiny-unet-xl res=64x64 steps=1",
      "sdxl.txt2img model=tiny-unet-xl vae=tiny-kl res=64x64 steps=1",
      "sdxl.refine model=tiny-unet-xl-refiner res=64x64 steps=2",
      "sdxl.base+refiner model=tiny-unet-xl refiner=tiny-unet-xl-refiner vae=tiny-kl res=64x64 "
      "steps=2",
      "wan.step model=tiny-wan res=32x48",
      "wan.denoise model=tiny-wan res=32x48 steps=1",
      "video.encode model=tiny-hv res=32x32",
      "video.decode model=tiny-hv res=32x32",
      "video.roundtrip model=tiny-hv res=32x32",
      "toy.forward model=tiny-toy res=8x8",
      "toy.tokens model=tiny-toy res=4x4"};
  ModelCache models;
  RunOptions o;
  o.check_memory = false;
  std::set<std::string> covered;
  for (const std::string& line : lines) {
    auto c = parse_case(line);
    ASSERT_TRUE(c.ok()) << line << ": " << c.error().message();
    Outcome refusal = Outcome::kError;
    auto p = prepare_case(*c, o, models, refusal);
    ASSERT_TRUE(p.ok()) << line << ": " << p.error().message();
    auto ran = run_reference(*p, {});
    ASSERT_TRUE(ran.ok()) << line << ": " << ran.error().message();
    // The reference run asks a chained pipeline for its stage outputs too: each is named by
    // the handoff's prefix and one of the first graph's outputs, after the pipeline's own.
    const std::optional<Handoff>& handoff = p->descriptor().handoff;
    std::vector<std::string> names, staged;
    for (const auto& [name, t] : ran->outputs)
      (handoff && name.rfind(handoff->prefix, 0) == 0 ? staged : names).push_back(name);
    EXPECT_EQ(names, p->descriptor().outputs) << line;
    if (handoff) {
      EXPECT_NE(std::find(staged.begin(), staged.end(), handoff->prefix + handoff->output),
                staged.end())
          << line;
      EXPECT_EQ(ran->outputs.front().first, p->descriptor().outputs.front()) << line;
    }
    covered.insert(p->descriptor().name);
  }
  for (const std::string& name : pipeline_names()) EXPECT_TRUE(covered.count(name)) << name;
}

TEST_F(FamilyRegistry, TheRegistryFindsEveryFamily) {
  EXPECT_TRUE(is_pipeline_name("toy.forward"));
  EXPECT_TRUE(is_pipeline_name("vae.decode"));
  auto toy = make_model("tiny-toy", 1);
  ASSERT_TRUE(toy.ok()) << toy.error().message();
  EXPECT_EQ(toy->family().class_name(), "ToyConvNet");
  auto kl = make_model("tiny-kl", 1);
  ASSERT_TRUE(kl.ok());
  EXPECT_EQ(kl->family().class_name(), "AutoencoderKL");
  // A pipeline of another family is refused naming the ones the model runs.
  const Status wrong = check_family_runs(*toy, "vae.decode");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("which runs toy.forward, toy.tokens, not vae.decode"),
            std::string::npos)
      << wrong.error().message();
  // `model init` writes a toy model folder that loads back through the registry.
  const std::string dir = ::testing::TempDir() + "/toy_model";
  ASSERT_TRUE(init_model("tiny-toy", 3, dir).ok());
  auto loaded = load_model(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_EQ(loaded->family().class_name(), "ToyConvNet");
  EXPECT_EQ(loaded->weights.size(), toy->weights.size());
  // An unknown class is refused naming every family.
  auto unknown = parse_model_config(nlohmann::json::parse(R"({"_class_name": "Nope"})"), "c.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find(
                "AutoencoderKL, AutoencoderTiny, UNet2DConditionModel, WanTransformer3DModel, "
                "AutoencoderKLHunyuanVideo, ToyConvNet"),
            std::string::npos)
      << unknown.error().message();
}

}  // namespace
}  // namespace tp
