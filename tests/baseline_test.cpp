// The gate's baseline (reports/baseline.h): what it keeps of a run, read back plain or gzipped,
// and the findings `diff_reports` makes against it.
#include "reports/baseline.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "reports/report_tools.h"

namespace tp {
namespace {

// A passed case with one plan and `copies` of one checkpoint.
CaseResult baseline_case(const std::string& id, const PlanSummary& plan, const std::string& name,
                         double accumulated, std::optional<double> local, int copies) {
  CaseResult c;
  c.id = id;
  c.outcome = Outcome::kPassed;
  c.plans = {plan};
  CheckpointRecord r;
  r.name = name;
  r.accumulated.rel_l2 = accumulated;
  r.has_local = local.has_value();
  r.local.rel_l2 = local.value_or(0);
  c.checkpoints.assign(copies, r);
  return c;
}

// A baseline file holds what the gate compares (outcomes, plan facts, per-checkpoint error to 3
// digits), reads back as a report, and `diff_reports` against it flags growth and changed plans.
TEST(Baseline, RoundTripsAndFlagsGrowthAndChangedPlans) {
  const CaseResult c = baseline_case("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32",
                                     {"vae.decoder [1, 4, 16, 16]", 41, 1310720, 262},
                                     "decoder.conv_in", 3.14159e-4, 2.71828e-4, 1);
  RunReport base;
  base.cases = {c};
  const std::string path = ::testing::TempDir() + "/twinpath-baseline.txt";
  ASSERT_TRUE(write_baseline(path, base).ok());
  auto back = read_report_or_baseline(path);
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->cases.size(), 1u);
  EXPECT_EQ(back->cases[0].id, c.id);
  EXPECT_EQ(back->cases[0].checkpoints.at(0).accumulated.rel_l2, 3.14e-4);
  EXPECT_EQ(back->cases[0].checkpoints.at(0).local.rel_l2, 2.72e-4);
  EXPECT_TRUE(diff_reports(*back, base, DiffOptions{1.4}).empty()) << "3 digits: no growth";

  RunReport next = base;
  next.cases[0].id += " inject=f16-store-truncate";  // held to the clean case's baseline
  next.cases[0].checkpoints[0].local.rel_l2 = 4.5e-4;
  next.cases[0].plans[0].arena_bytes = 1048576;
  const std::vector<DiffFinding> found = diff_reports(*back, next, DiffOptions{1.4});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_NE(found[0].what.find("plans changed"), std::string::npos) << found[0].what;
  EXPECT_NE(found[1].what.find("local rel L2 grew 0.000272 -> 0.00045"), std::string::npos)
      << found[1].what;

  RunReport unrecorded = base;  // a report from before plans were recorded: nothing to compare
  unrecorded.cases[0].plans.clear();
  EXPECT_TRUE(diff_reports(unrecorded, next, DiffOptions{2}).empty());

  std::ofstream(path) << "twinpath-baseline 1\ncp\tx\t1\t1\t0\n";
  auto bad = read_baseline(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find(":2: a line before the first case"), std::string::npos)
      << bad.error().message();
}

// ci's baseline outgrew a plain file: a path ending in .gz is written gzipped, deterministically
// (the same run gives the same bytes), and read back by its first bytes; a cut one is refused
// in a sentence.
TEST(Baseline, GzippedRoundTripsAndRefusesACutFile) {
  const CaseResult c =
      baseline_case("video.decode model=tiny-hv res=64x64 frames=5 w=f16 a=f16 acc=f32",
                    {"video.decoder [1, 4, 2, 8, 8]", 58, 2097152, 301},
                    "decoder.up_blocks.0.resnets.0", 1.23456e-3, std::nullopt, 3);
  RunReport base;
  base.cases = {c, c};
  const std::string path = ::testing::TempDir() + "/twinpath-baseline.txt.gz";
  ASSERT_TRUE(write_baseline(path, base).ok());
  const auto bytes = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string first = bytes();
  ASSERT_GE(first.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(first[0]), 0x1f) << "gzip's magic";
  ASSERT_TRUE(write_baseline(path, base).ok());
  EXPECT_EQ(bytes(), first) << "the same run, the same bytes";
  auto back = read_report_or_baseline(path);
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->cases.size(), 2u);
  EXPECT_EQ(back->cases[1].plans.at(0).graph, "video.decoder [1, 4, 2, 8, 8]");
  EXPECT_EQ(back->cases[1].checkpoints.at(2).accumulated.rel_l2, 1.23e-3);
  EXPECT_FALSE(back->cases[1].checkpoints.at(2).has_local);

  std::ofstream(path, std::ios::binary) << first.substr(0, first.size() / 2);
  auto cut = read_report_or_baseline(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("gzip stream is damaged or cut short"), std::string::npos)
      << cut.error().message();
}

}  // namespace
}  // namespace tp
