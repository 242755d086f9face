// What a user reads after a run: where its report went (every run keeps its own, out/latest.h5
// links the newest), each case's checkpoint nearest its tolerance in `report show` and
// `run --json`, every checkpoint with `report show --layers`, and `report diff --json`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "reports/h5_report.h"
#include "reports/margins.h"
#include "reports/run_files.h"
#include "tests/support/command.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::shell;
using testing::twinpath;

constexpr const char* kCase = "vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32";

CheckpointRecord record(const std::string& name, bool local, double rel_l2, double max_abs) {
  CheckpointRecord r;
  r.name = name;
  r.has_local = local;
  Metrics& m = local ? r.local : r.accumulated;
  m.rel_l2 = rel_l2;
  m.max_abs = max_abs;
  m.want_max_abs = 1;
  r.tolerance_rel_l2 = 4e-3;
  r.tolerance_max_element = 1;
  return r;
}

TEST(Margins, TheWorstCheckpointIsTheOneNearestItsTolerance) {
  CaseResult c;
  c.checkpoints = {record("a", true, 1e-3, 0.1), record("output:sample", false, 2e-3, 0.1)};
  auto worst = worst_checkpoint(c);
  ASSERT_TRUE(worst);
  EXPECT_EQ(worst->checkpoint->name, "output:sample");  // accumulated: outputs have no local
  EXPECT_FALSE(worst->local);
  EXPECT_EQ(worst->measure, "rel L2");
  EXPECT_DOUBLE_EQ(worst->margin, 2);

  // The worst element nearer its bound than rel L2 is: margin by max element.
  c.checkpoints.push_back(record("b", true, 1e-4, 0.8));
  worst = worst_checkpoint(c);
  EXPECT_EQ(worst->checkpoint->name, "b");
  EXPECT_EQ(worst->measure, "max element");
  EXPECT_DOUBLE_EQ(worst->margin, 1.25);
  EXPECT_NE(margin_text(*worst).find("b (local): max element 8.00e-01, tolerance 1.00e+00, "
                                     "margin x1.25"),
            std::string::npos)
      << margin_text(*worst);

  // New non-finite values leave no margin; a checkpoint without a tolerance is not ranked.
  c.checkpoints[0].local.non_finite_new = 3;
  c.checkpoints.push_back(record("uncompared", true, 1, 1));
  c.checkpoints.back().tolerance_rel_l2 = 0;
  worst = worst_checkpoint(c);
  EXPECT_EQ(worst->checkpoint->name, "a");
  EXPECT_EQ(worst->margin, 0);
  EXPECT_NE(margin_text(*worst).find("3 non-finite values"), std::string::npos);
  EXPECT_NE(margin_table(c).find("uncompared: not compared"), std::string::npos);
}

class ReportReading : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tp_reading_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  // twinpath run in the test's own folder, so its out/ is the test's.
  testing::CommandResult run_here(const std::string& args) const {
    return shell("cd " + dir_.string() + " && " + TWINPATH_BINARY + " " + args);
  }
  fs::path dir_;
};

TEST_F(ReportReading, EveryRunKeepsItsOwnReportAndLatestLinksTheNewest) {
  const auto first = run_here(std::string("run --case '") + kCase + "'");
  ASSERT_EQ(first.code, 0) << first.output;
  const auto second = run_here(std::string("run --case '") + kCase + "' --filter tiny");
  ASSERT_EQ(second.code, 0) << second.output;
  for (const auto* r : {&first, &second})
    EXPECT_NE(r->output.find("report: out/runs/"), std::string::npos) << r->output;
  // Both kept, under different names; latest links the second run's.
  const std::string said = second.output.substr(second.output.find("report: ") + 8);
  const std::string second_path = said.substr(0, said.find(' '));
  EXPECT_EQ(first.output.find(second_path), std::string::npos) << first.output;
  ASSERT_TRUE(fs::is_symlink(p("out/latest.h5")));
  EXPECT_EQ(fs::canonical(p("out/latest.h5")), fs::canonical(p(second_path)));
  EXPECT_TRUE(fs::exists(p("out/latest.xml")));
  auto latest = read_h5_report(p("out/latest.h5"));
  ASSERT_TRUE(latest.ok()) << latest.error().message();
  EXPECT_NE(latest->command_line.find("--filter tiny"), std::string::npos);

  // Older runs past the kept number go, oldest first; files of other names stay.
  for (int i = 0; i < kKeptRuns; ++i) {
    const std::string stem = p("out/runs/20000101-0000" + std::to_string(10 + i));
    fs::copy_file(p(second_path), stem + ".h5");
    std::ofstream(stem + ".xml") << "<testsuites/>";
  }
  std::ofstream(p("out/runs/mine.h5")) << "not a run's";
  ASSERT_EQ(run_here(std::string("run --case '") + kCase + "'").code, 0);
  int kept = 0;
  for (const auto& e : fs::directory_iterator(p("out/runs")))
    kept += e.path().extension() == ".h5" && e.path().filename() != "mine.h5";
  EXPECT_EQ(kept, kKeptRuns);
  EXPECT_FALSE(fs::exists(p("out/runs/20000101-000010.h5")));
  EXPECT_FALSE(fs::exists(p("out/runs/20000101-000011.xml")));
  EXPECT_TRUE(fs::exists(p("out/runs/20000101-000019.h5")));
  EXPECT_TRUE(fs::exists(p("out/runs/mine.h5")));

  // A run given --report writes only that.
  fs::remove_all(p("out"));
  ASSERT_EQ(run_here(std::string("run --case '") + kCase + "' --report given.h5").code, 0);
  EXPECT_TRUE(fs::exists(p("given.h5")));
  EXPECT_FALSE(fs::exists(p("out")));
}

TEST_F(ReportReading, ShowAndJsonNameEachCasesWorstCheckpoint) {
  const auto run = shell(std::string("(") + TWINPATH_BINARY + " run --case '" + kCase +
                         "' --json --report " + p("r.h5") + " 2>/dev/null)");  // stdout alone
  ASSERT_EQ(run.code, 0) << run.output;
  const auto json = nlohmann::json::parse(run.output, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << run.output;
  const auto& worst = json["cases"][0]["worst"];
  ASSERT_TRUE(worst.is_object()) << json.dump(2);
  const double error = worst["error"], tolerance = worst["tolerance"], margin = worst["margin"];
  EXPECT_GT(error, 0);
  EXPECT_LT(error, tolerance);
  EXPECT_NEAR(margin, tolerance / error, 1e-9 * margin);

  auto report = read_h5_report(p("r.h5"));
  ASSERT_TRUE(report.ok());
  const std::string name = worst["checkpoint"];
  const auto show = twinpath("report show " + p("r.h5"));
  EXPECT_EQ(show.code, 0) << show.output;
  EXPECT_NE(show.output.find("    worst: " + name + " (" + std::string(worst["judged"])),
            std::string::npos)
      << show.output;
  const auto layers = twinpath("report show --layers " + p("r.h5"));
  for (const CheckpointRecord& r : report->cases[0].checkpoints)
    EXPECT_NE(layers.output.find("      " + r.name + " ("), std::string::npos) << r.name;

  // report diff --json: the regressions a script reads.
  report->cases[0].checkpoints.back().accumulated.non_finite_new = 2;
  ASSERT_TRUE(write_h5_report(p("grown.h5"), *report).ok());
  const auto diff = twinpath("report diff --json " + p("r.h5") + " " + p("grown.h5"));
  EXPECT_EQ(diff.code, 1) << diff.output;
  const auto found = nlohmann::json::parse(diff.output, nullptr, false);
  ASSERT_FALSE(found.is_discarded()) << diff.output;
  ASSERT_EQ(found["regressions"].size(), 1u) << diff.output;
  EXPECT_EQ(found["regressions"][0]["case"], kCase);
  EXPECT_EQ(found["regressions"][0]["checkpoint"], "output:sample");
}

}  // namespace
}  // namespace tp
