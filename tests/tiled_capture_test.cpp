// Tiled cases capture every tile's fused groups (each tile a graph call, "tileK/"), so local
// error and the numerics contract see a rounding fault inside a tile, as they do untiled; a
// tiled case that fits the memory only without keeping every tile's values runs without them
// and says so.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness/cli/paths.h"
#include "harness/runner/case_runner.h"
#include "harness/runner/memory_budget.h"
#include "harness/runner/runs.h"

namespace tp {
namespace {

// As `twinpath run` runs a case: with the numerics contract's check where LibTorch is built in.
CaseResult run(const std::string& line, RunOptions options = {}) {
  static ModelCache models;
  options.contract = contract_checker();
  auto c = parse_case(line);
  if (!c.ok()) throw std::runtime_error(c.error().message());
  return run_case(*c, options, models);
}

int tiles_seen(const CaseResult& r) {
  int tiles = 0;
  for (const CheckpointRecord& c : r.checkpoints)
    if (c.name.rfind("tile", 0) == 0)
      tiles = std::max(tiles, std::stoi(c.name.substr(4, c.name.find('/') - 4)) + 1);
  return tiles;
}

TEST(TiledCapture, EveryTilesGroupsAreCheckpointsWithLocalError) {
  for (const char* pipeline : {"vae.decode", "vae.encode", "vae.roundtrip"}) {
    const CaseResult r = run(std::string(pipeline) +
                             " model=tiny-kl res=48x80 w=f16 a=f16 acc=f32 tiling=on "
                             "tile=32:16");
    EXPECT_EQ(r.outcome, Outcome::kPassed) << pipeline << ": " << r.reason;
    EXPECT_GE(tiles_seen(r), 4) << pipeline;
    int local = 0, contract = 0;
    for (const CheckpointRecord& c : r.checkpoints) {
      local += c.has_local && c.name.rfind("tile", 0) == 0;
      contract += c.contract.decided + c.contract.ambiguous > 0;
    }
    EXPECT_GT(local, 20) << pipeline;
    if (contract_checker()) {
      EXPECT_GT(contract, 20) << pipeline;
    }
    // The seams and interiors against the untiled reference stay beside them.
    EXPECT_TRUE(std::any_of(r.checkpoints.begin(), r.checkpoints.end(),
                            [](const CheckpointRecord& c) { return c.op_class == "seam"; }));
  }
}

TEST(TiledCapture, ARoundingFaultInATileFailsAsUntiled) {
  if (!contract_checker()) GTEST_SKIP() << "the numerics contract needs LibTorch";
  for (const char* tiling : {"", " tiling=on tile=32:16"}) {
    const CaseResult r = run(std::string("vae.decode model=tiny-kl res=48x80 w=f16 a=f16 acc=f32") +
                             tiling + " inject=f16-store-truncate");
    EXPECT_EQ(r.outcome, Outcome::kFailed) << tiling << ": " << r.reason;
    // Named by its tile when tiled ("tile0/post_quant_conv"), by the layer alone when not.
    const bool tiled = !std::string(tiling).empty();
    EXPECT_EQ(r.reason.find("tile") != std::string::npos, tiled) << r.reason;
  }
}

TEST(TiledCapture, ATiledCaseTooLargeToCaptureRunsWithoutItAndSaysSo) {
  const std::string line =
      "vae.decode model=tiny-kl res=160x160 w=f16 a=f16 acc=f32 tiling=on "
      "tile=32:16";
  const CaseResult full = run(line);
  ASSERT_EQ(full.outcome, Outcome::kPassed) << full.reason;
  ASSERT_GT(tiles_seen(full), 20);
  // A budget between what the bare tiled run needs and what keeping every tile needs.
  auto c = parse_case(line);
  ASSERT_TRUE(c.ok());
  ModelCache models;
  Outcome refusal{};
  RunOptions sizing;
  sizing.check_memory = false;
  auto p = prepare_case(*c, sizing, models, refusal);
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto kept = estimate_case_memory(*p, true);
  p->capture_tiles = false;
  auto bare = estimate_case_memory(*p, true);
  ASSERT_TRUE(kept.ok() && bare.ok());
  ASSERT_LT(bare->bytes, kept->bytes);
  RunOptions tight;
  tight.memory_budget = (bare->bytes + kept->bytes) / 2;
  const CaseResult r = run(line, tight);
  EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  EXPECT_NE(r.reason.find("tiles' groups not captured"), std::string::npos) << r.reason;
  EXPECT_EQ(tiles_seen(r), 0);
  tight.memory_budget = bare->bytes / 2;
  EXPECT_EQ(run(line, tight).outcome, Outcome::kError);  // refused before it allocates
}

}  // namespace
}  // namespace tp
