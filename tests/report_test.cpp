// Reports end to end: HDF5 read by independent readers (h5dump, h5py), JUnit, atomic writes
// under a kill, shards merged into the unsharded report, and `report diff` catching a planted
// error growth.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "harness/cli/report_command.h"
#include "harness/core/shard.h"
#include "reports/baseline.h"
#include "reports/h5_report.h"
#include "reports/report_tools.h"
#include "reports/result_schema.h"
#include "tests/support/command.h"
#include "tests/support/scratch_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using testing::shell;
using testing::twinpath;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Two reports of the same cases agree case by case (id, ordinal, outcome, reason) and checkpoint
// by checkpoint (name, accumulated and local relative L2; NaN equals NaN).
void expect_same_cases(const std::string& expected_file, const std::string& actual_file) {
  auto expected = read_h5_report(expected_file);
  auto actual = read_h5_report(actual_file);
  ASSERT_TRUE(expected.ok() && actual.ok());
  ASSERT_EQ(actual->cases.size(), expected->cases.size());
  const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  for (std::size_t i = 0; i < expected->cases.size(); ++i) {
    const CaseResult &a = expected->cases[i], &b = actual->cases[i];
    EXPECT_EQ(b.id, a.id);
    EXPECT_EQ(b.ordinal, a.ordinal) << a.id;
    EXPECT_EQ(b.outcome, a.outcome) << a.id;
    EXPECT_EQ(b.reason, a.reason) << a.id;
    ASSERT_EQ(b.checkpoints.size(), a.checkpoints.size()) << a.id;
    for (std::size_t k = 0; k < a.checkpoints.size(); ++k) {
      const CheckpointRecord &ca = a.checkpoints[k], &cb = b.checkpoints[k];
      EXPECT_EQ(cb.name, ca.name) << a.id;
      EXPECT_TRUE(same(cb.accumulated.rel_l2, ca.accumulated.rel_l2)) << a.id << " " << ca.name;
      EXPECT_EQ(cb.has_local, ca.has_local) << a.id << " " << ca.name;
      EXPECT_TRUE(same(cb.local.rel_l2, ca.local.rel_l2)) << a.id << " " << ca.name;
    }
  }
}

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_.emplace("report");
    std::ofstream suite(p("suite.txt"));
    suite << "# three outcomes\n"
          << "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32\n"
          << "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 "
             "boost=decoder.up_blocks.0.resnets.0.conv1*1e5\n"
          << "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 boost=decoder.conv_out*0\n"
          << "vae.encode model=tiny-taesd res=64x64 w=bf16 a=bf16 acc=f32\n"
          << "vae.roundtrip model=tiny-kl res=32x32 w=f8e4m3 a=f16 acc=f32\n"
          << "vae.decode model=tiny-kl res=64x64 w=f8e4m3 a=f8e4m3 acc=f32\n"
          << "vae.decode model=tiny-kl stream=64x64+256x256 w=f16 a=f16 acc=f32 mem=4MiB\n";
  }
  static void TearDownTestSuite() { scratch_.reset(); }
  static std::string p(const std::string& name) { return scratch_->path(name); }
  static inline std::optional<ScratchDir> scratch_;
};

TEST_F(ReportTest, ReportOpensInH5dumpAndH5pyAndJUnitListsEveryCase) {
  const auto r = twinpath("run --suite " + p("suite.txt") + " --report " + p("r.h5") + " --junit " +
                          p("r.xml") + " --dump failing");
  EXPECT_EQ(r.code, 1) << r.output;  // the overflow case fails
  EXPECT_NE(r.output.find("1 mistrusted, 1 unsupported, 4 passed, 1 failed\n"), std::string::npos)
      << r.output;
  // The expected refusal is counted in one summary line, not printed as a case of its own.
  EXPECT_EQ(r.output.find("UNSUPPORTED "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 refused as unsupported (each in the report and JUnit): 1 "
                          "activations are stored in f32, f16 or bf16, not f8e4m3\n"),
            std::string::npos)
      << r.output;

  const auto dump = shell("h5dump -H " + p("r.h5"));
  ASSERT_EQ(dump.code, 0) << dump.output;
  EXPECT_NE(dump.output.find("DATASET \"checkpoints\""), std::string::npos);
  EXPECT_NE(dump.output.find("H5T_COMPOUND"), std::string::npos);
  EXPECT_NE(dump.output.find("GROUP \"provenance\""), std::string::npos);

  // h5py (Debian's python3-h5py) reads attributes, the compound table and the provenance.
  const std::string script =
      "import h5py, sys\n"
      "f = h5py.File(sys.argv[1], 'r')\n"
      "assert f.attrs['schema_version'] == 1\n"
      "assert f.attrs['summary'].endswith('4 passed, 1 failed'), f.attrs['summary']\n"
      "cases = [f['cases'][k] for k in sorted(f['cases'])]\n"
      "outcomes = [c.attrs['outcome'] for c in cases]\n"
      "assert outcomes == ['PASSED', 'FAILED', 'MISTRUSTED', 'PASSED', 'PASSED', 'UNSUPPORTED', "
      "'PASSED'], outcomes\n"
      "s = cases[6]['stream'][:]\n"
      "assert list(s['refused']) == [0, 1] and s[1]['need_bytes'] == 10 << 20 and "
      "s[0]['total_compilations'] == 1, s\n"
      "t = cases[0]['checkpoints'][:]\n"
      "local = t[t['has_local'] == 1]\n"
      "assert len(t) > 20 and t['passed'].all() and len(local) > 20 and (local['local_rel_l2'] < "
      "local['tol_rel_l2']).all()\n"
      "assert t[-1]['name'] == b'output:sample' and 0 < t[-1]['rel_l2'] < 0.01\n"
      "pr = cases[1]['provenance']\n"
      "assert pr.attrs['layer'] == 'decoder.up_blocks.0.resnets.0.conv1' and pr.attrs['cause'] == "
      "'overflow'\n"
      "assert 'dumps' in cases[1] and 'dumps' not in cases[0]\n"
      "print('h5py ok', len(cases))\n";
  std::ofstream(p("check.py")) << script;
  const auto py = shell("/usr/bin/python3 " + p("check.py") + " " + p("r.h5"));
  EXPECT_EQ(py.code, 0) << py.output;
  EXPECT_NE(py.output.find("h5py ok 7"), std::string::npos) << py.output;

  const std::string xml = read_text(p("r.xml"));
  EXPECT_NE(xml.find("tests=\"7\" failures=\"1\" errors=\"0\" skipped=\"2\""), std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<failure message=\"FAILED: first non-finite value"), std::string::npos);

  // Our own reader sees what was written; `report show` prints it.
  auto back = read_h5_report(p("r.h5"));
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->cases.size(), 7u);
  ASSERT_EQ(back->cases[6].stream.size(), 2u);
  EXPECT_TRUE(back->cases[6].stream[1].refused);
  EXPECT_NE(back->cases[6].stream[1].note.find("needs 10.00 MiB"), std::string::npos)
      << back->cases[6].stream[1].note;
  EXPECT_EQ(back->cases[1].provenance.cause, "overflow");
  EXPECT_EQ(back->cases[1].provenance.index.size(), 4u);
  EXPECT_FALSE(back->cases[0].checkpoints[0].accumulated.worst.empty());
  const auto show = twinpath("report show " + p("r.h5"));
  EXPECT_EQ(show.code, 1);
  EXPECT_NE(show.output.find("4 passed, 1 failed"), std::string::npos) << show.output;
}

TEST_F(ReportTest, KilledRunLeavesNoPartialReport) {
  std::ofstream suite(p("long.txt"));
  for (int i = 0; i < 40; ++i)
    suite << "vae.roundtrip model=tiny-kl res=" << 32 + 4 * i << "x64 w=f16 a=f16 acc=f32\n";
  suite.close();
  std::ofstream(p("old.h5")) << "an earlier report";
  fs::copy_file(p("old.h5"), p("k.h5"));
  const auto killed =
      shell("(" + std::string(TWINPATH_BINARY) + " run --suite " + p("long.txt") + " --report " +
            p("k.h5") + " --junit " + p("k.xml") +
            " > /dev/null & pid=$!; sleep 1; kill -9 $pid; wait $pid; echo killed $?)");
  EXPECT_NE(killed.output.find("killed 137"), std::string::npos) << killed.output;
  EXPECT_EQ(read_text(p("k.h5")), "an earlier report");  // untouched, not half-replaced
  EXPECT_FALSE(fs::exists(p("k.xml")));
}

// Each shard from another scheduler's variables: GoogleTest's, a Kubernetes indexed Job's, and a
// Slurm array's (task 5 of --array=1-5:2 is the third task).
TEST_F(ReportTest, MergedShardsEqualTheUnshardedRun) {
  ASSERT_EQ(twinpath("run --suite " + p("suite.txt") + " --report " + p("all.h5")).code, 1);
  const std::string run = std::string(TWINPATH_BINARY) + " run --suite " + p("suite.txt");
  // Cases go round-robin: shard 1 holds cases 1 and 4, so the failing overflow case.
  ASSERT_EQ(
      shell("GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=0 " + run + " --report " + p("s0.h5")).code, 0);
  ASSERT_EQ(
      shell("JOB_COMPLETION_INDEX=1 TWINPATH_SHARD_COUNT=3 " + run + " --report " + p("s1.h5"))
          .code,
      1);
  ASSERT_EQ(shell("SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_STEP=2 "
                  "SLURM_ARRAY_TASK_COUNT=3 " +
                  run + " --report " + p("s2.h5"))
                .code,
            0);
  for (int k = 0; k < 3; ++k) {
    auto shard = read_h5_report(p("s" + std::to_string(k) + ".h5"));
    ASSERT_TRUE(shard.ok());
    EXPECT_EQ(shard->shard, std::to_string(k) + "/3");
  }
  const auto merged = twinpath("report merge " + p("s2.h5") + " " + p("s0.h5") + " " + p("s1.h5") +
                               " --out " + p("merged.h5"));
  ASSERT_EQ(merged.code, 0) << merged.output;
  expect_same_cases(p("all.h5"), p("merged.h5"));
  const auto twice =
      twinpath("report merge " + p("s0.h5") + " " + p("s0.h5") + " --out " + p("bad.h5"));
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.output.find("is in both"), std::string::npos) << twice.output;
  const auto missing =
      twinpath("report merge " + p("s0.h5") + " " + p("s2.h5") + " --out " + p("bad.h5"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("shard 1 of 3 is missing"), std::string::npos) << missing.output;
  EXPECT_FALSE(fs::exists(p("bad.h5")));
  const auto bad_shard = twinpath("run --suite " + p("suite.txt") + " --shard 3/3");
  EXPECT_EQ(bad_shard.code, 2);
  EXPECT_NE(bad_shard.output.find("K counts from 0"), std::string::npos) << bad_shard.output;
  const auto no_count = shell("JOB_COMPLETION_INDEX=1 " + run);
  EXPECT_EQ(no_count.code, 2);
  EXPECT_NE(no_count.output.find("set it in the manifest to the Job's completions"),
            std::string::npos)
      << no_count.output;
  const auto uneven = shell(
      "SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_STEP=2 "
      "SLURM_ARRAY_TASK_COUNT=3 " +
      run);
  EXPECT_EQ(uneven.code, 2);
  EXPECT_NE(uneven.output.find("is not a task of an evenly stepped array"), std::string::npos)
      << uneven.output;
}

// Shards from a real scheduler: a one-node Slurm cluster (Debian's slurmctld, slurmd, munge; root)
// runs tools/slurm/submit.sh's 3-task job array, each task taking its shard from Slurm's array
// variables, then the merge job that waits for all of them (one shard fails a case and exits 1,
// so the merge must not wait on success). The merged report equals the unsharded run.
TEST_F(ReportTest, ASlurmJobArrayAndItsMergeEqualTheUnshardedRun) {
  const bool ci = std::getenv("CI") != nullptr;
  if (::geteuid() != 0 || shell("command -v slurmctld slurmd munged sbatch").code != 0) {
    if (ci) FAIL() << "CI must run this test: run it as root after tools/install-deps.sh";
    GTEST_SKIP() << "needs root and Debian's slurmctld, slurmd and munge (tools/install-deps.sh)";
  }
  ASSERT_EQ(twinpath("run --suite " + p("suite.txt") + " --report " + p("all.h5")).code, 1);
  const std::string cluster = p("slurm");
  const std::string helper = std::string(TWINPATH_SOURCE_DIR) + "/tests/support/slurm-cluster.sh";
  const int port = 20000 + ::getpid() % 20000;
  struct Stop {
    std::string command;
    ~Stop() { shell(command); }
  } stop{"bash " + helper + " stop " + cluster};
  const auto up = shell("bash " + helper + " start " + cluster + " " + std::to_string(port));
  ASSERT_EQ(up.code, 0) << up.output;
  const std::string env = "export SLURM_CONF=" + cluster + "/slurm.conf; ";
  const auto submit = shell(env + "bash " + std::string(TWINPATH_SOURCE_DIR) +
                            "/tools/slurm/submit.sh --shards 3 --out " + p("array") +
                            " --twinpath " + TWINPATH_BINARY + " -- --suite " + p("suite.txt"));
  ASSERT_EQ(submit.code, 0) << submit.output;
  // Wait for the queue to empty (the merge runs last), at most 5 minutes.
  const auto drained = shell(env +
                             "for i in $(seq 300); do [ -z \"$(squeue -h)\" ] && exit 0; "
                             "sleep 1; done; squeue; exit 1");
  ASSERT_EQ(drained.code, 0) << drained.output << read_text(cluster + "/log/slurmctld.log");
  const std::string merge_log = read_text(p("array") + "/merge.log");
  EXPECT_NE(merge_log.find("merged 3 reports"), std::string::npos) << merge_log;
  for (int k = 0; k < 3; ++k) {
    auto shard = read_h5_report(p("array") + "/shard-" + std::to_string(k) + ".h5");
    ASSERT_TRUE(shard.ok()) << shard.error().message() << read_text(p("array") + "/shard-0.log");
    EXPECT_EQ(shard->shard, std::to_string(k) + "/3");
  }
  expect_same_cases(p("all.h5"), p("array") + "/merged.h5");
  // The merge job's summary is the unsharded verdict: one case failed.
  const std::string summary = read_text(p("array") + "/merged.txt");
  EXPECT_NE(summary.find("4 passed, 1 failed"), std::string::npos) << summary;
}

TEST_F(ReportTest, ConcurrentCasesEqualOneAtATime) {
  // --jobs 3 on any machine: three cases in flight, finishing out of order.
  ASSERT_EQ(twinpath("run --suite " + p("suite.txt") + " --jobs 1 --report " + p("j1.h5")).code, 1);
  ASSERT_EQ(twinpath("run --suite " + p("suite.txt") + " --jobs 3 --report " + p("j3.h5")).code, 1);
  expect_same_cases(p("j1.h5"), p("j3.h5"));
  // One at a time, each case's peak resident memory is its own; concurrent cases share one.
  auto one = read_h5_report(p("j1.h5")), three = read_h5_report(p("j3.h5"));
  ASSERT_TRUE(one.ok() && three.ok());
  for (const CaseResult& c : one->cases) EXPECT_GT(c.peak_rss_bytes, 1 << 20) << c.id;
  for (const CaseResult& c : three->cases) EXPECT_EQ(c.peak_rss_bytes, 0) << c.id;
  for (const char* bad : {"0", "two", "65"}) {
    const auto r = twinpath("run --suite " + p("suite.txt") + " --jobs " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.output.find("is not auto or a number of concurrent cases"), std::string::npos)
        << r.output;
  }
}

TEST_F(ReportTest, DiffFlagsPlantedErrorGrowthAndNewNonFinite) {
  const std::string line = "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32";
  ASSERT_EQ(twinpath("run --case '" + line + "' --report " + p("base.h5")).code, 0);
  // The same run again is no regression, inline (--baseline) or as a diff.
  const auto same = twinpath("run --case '" + line + "' --report " + p("same.h5") + " --baseline " +
                             p("base.h5"));
  EXPECT_EQ(same.code, 0) << same.output;
  EXPECT_NE(same.output.find("0 regressions"), std::string::npos) << same.output;
  EXPECT_EQ(twinpath("report diff " + p("base.h5") + " " + p("same.h5")).code, 0);

  // Plant: one layer's local error x3 (still under tolerance), another checkpoint grows a NaN.
  auto planted = read_h5_report(p("base.h5"));
  ASSERT_TRUE(planted.ok());
  std::vector<CheckpointRecord>& records = planted->cases[0].checkpoints;
  auto grown = std::find_if(records.begin(), records.end(), [](const CheckpointRecord& c) {
    return c.has_local && c.local.rel_l2 > 0 && 3 * c.local.rel_l2 < c.tolerance_rel_l2;
  });
  ASSERT_NE(grown, records.end());
  grown->local.rel_l2 *= 3;
  records.back().accumulated.non_finite_new = 1;
  ASSERT_TRUE(write_h5_report(p("planted.h5"), *planted).ok());
  const auto diff = twinpath("report diff " + p("base.h5") + " " + p("planted.h5"));
  EXPECT_EQ(diff.code, 1) << diff.output;
  EXPECT_NE(diff.output.find(grown->name + "\n    local rel L2 grew"), std::string::npos)
      << diff.output;
  EXPECT_NE(diff.output.find("1 non-finite values where the reference is finite (0 before)"),
            std::string::npos)
      << diff.output;
  EXPECT_NE(diff.output.find("2 regressions"), std::string::npos) << diff.output;

  // The same commands in process, from a binary that links only the reports and the core.
  auto in_process = report_diff_command(p("base.h5"), p("planted.h5"), 2.0, false);
  ASSERT_TRUE(in_process.ok());
  EXPECT_EQ(*in_process, 1);
  auto shown = report_show_command(p("base.h5"), false, false);
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(*shown, 0);
}

// Every column of every row type survives the HDF5 writer and reader (one schema makes both),
// and large tables are stored compressed.
TEST_F(ReportTest, EveryColumnRoundTripsAndLargeTablesAreCompressed) {
  CaseResult c;
  c.id = "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32";
  c.outcome = Outcome::kFailed;
  for (int i = 0; i < 100; ++i) {  // every field differs from its default and between rows
    CheckpointRecord r;
    r.name = "decoder.up_blocks." + std::to_string(i) + ".conv";
    r.graph = "vae.decoder";
    r.group = i;
    r.op_class = "conv";
    r.dtype = "f16";
    for (Metrics* m : {&r.accumulated, &r.local}) {
      const double k = i + (m == &r.local ? 0.5 : 0.25);
      *m = Metrics{};
      m->count = int64_t(k * 7);
      m->max_abs = k, m->max_rel = k + 1, m->rel_l2 = k + 2, m->cosine = k + 3;
      m->ulp_median = k + 4, m->ulp_p99 = k + 5, m->ulp_max = k + 6;
      m->non_finite_got = int64_t(k * 3), m->non_finite_want = int64_t(k * 5);
      m->non_finite_new = int64_t(k * 11);
      m->bias_ulp = -k / 8, m->bias_se = k / 64, m->ulp_rms = k + 9, m->bias_ratio = -k / 16;
      m->toward_zero = 0.5 + k / 100, m->away_from_zero = 0.25;
      m->want_max_abs = k + 7, m->headroom = k + 8;
      m->worst.push_back(WorstElement{{0, 1, i, 2}, k, -k, 2 * k});
    }
    r.has_local = true;
    r.tolerance_rel_l2 = i * 1e-3;
    r.tolerance_max_element = i * 1e-2;
    r.tolerance_basis = "f16 conv";
    r.passed = i % 2;
    r.contract = ContractMetrics{true,      10 * i,    i,    i / 2, i / 3, 1.5 * double(i),
                                 {0, i, 1}, double(i), -1.0, 2.0};
    c.checkpoints.push_back(r);
  }
  StreamStep step{"64x80", "[1, 4, 8, 10]", 1, 2, 0.5, 3, 4, 5, 6, true, 7, 0.125, "refused", ""};
  c.stream = {step, step};
  c.plans = {{"vae.decoder [1, 4, 16, 16]", 41, 1310720, 262}};
  c.peak_rss_bytes = 3'000'000'123;
  c.contract = {{"vae.decoder", 3, "output", "decoder.conv_in", "f16", "nearest even"}};
  RunReport report;
  report.device = "cuda";
  report.backend = "kernels=fused graphs=on";
  report.cases = {c};
  ASSERT_TRUE(write_h5_report(p("rows.h5"), report).ok());
  auto back = read_h5_report(p("rows.h5"));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->device, "cuda");
  EXPECT_EQ(back->backend, "kernels=fused graphs=on");
  const CaseResult& got = back->cases.at(0);
  ASSERT_EQ(got.checkpoints.size(), c.checkpoints.size());
  for (std::size_t i = 0; i < c.checkpoints.size(); ++i) {
    for (const Column<CheckpointRecord>& col : checkpoint_schema())
      EXPECT_EQ(col.get(got.checkpoints[i]), col.get(c.checkpoints[i])) << col.name << " row " << i;
    EXPECT_EQ(got.checkpoints[i].local.worst.at(0).index, c.checkpoints[i].local.worst[0].index);
  }
  EXPECT_EQ(got.peak_rss_bytes, c.peak_rss_bytes);
  ASSERT_EQ(got.plans.size(), 1u);
  for (const Column<PlanSummary>& col : plan_summary_schema())
    EXPECT_EQ(col.get(got.plans[0]), col.get(c.plans[0])) << col.name;
  ASSERT_EQ(got.contract.size(), 1u);
  for (const Column<ContractRow>& col : contract_row_schema())
    EXPECT_EQ(col.get(got.contract[0]), col.get(c.contract[0])) << col.name;
  ASSERT_EQ(got.stream.size(), 2u);
  for (const Column<StreamStep>& col : stream_schema())
    EXPECT_EQ(col.get(got.stream[1]), col.get(step)) << col.name;
  const auto py = shell(
      "/usr/bin/python3 -c \"import h5py, sys; c = h5py.File(sys.argv[1])['cases']; "
      "print(c[list(c)[0]]['checkpoints'].compression)\" " +
      p("rows.h5"));
  EXPECT_EQ(py.output, "gzip\n");
}

TEST_F(ReportTest, ReadersRefuseWhatIsNotAReport) {
  std::ofstream(p("junk.h5")) << "not hdf5";
  const auto junk = twinpath("report show " + p("junk.h5"));
  EXPECT_EQ(junk.code, 2);
  EXPECT_NE(junk.output.find("is not an HDF5 file"), std::string::npos) << junk.output;
  const auto missing = twinpath("report diff " + p("nope.h5") + " " + p("junk.h5"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("no such report"), std::string::npos) << missing.output;
  const auto no_dir =
      twinpath("run --case 'vae.decode model=tiny-kl res=32x32' --report /no/such/dir/r.h5");
  EXPECT_EQ(no_dir.code, 2);
  // Said before the case runs, not after.
  EXPECT_NE(no_dir.output.find("the folder /no/such/dir does not exist; create it first"),
            std::string::npos)
      << no_dir.output;
  EXPECT_EQ(no_dir.output.find("PASSED"), std::string::npos) << no_dir.output;
}

}  // namespace
}  // namespace tp

namespace tp {
namespace {

// A run stopped by SIGTERM (a scheduler's time limit; twice at once, as GNU timeout sends it to
// the process and then to its group) after a few cases keeps them in a report
// marked incomplete, with the cases it did not run; --resume runs those and completes the
// report, which then equals an uninterrupted run's case for case, bit for bit.
TEST_F(ReportTest, AnInterruptedRunKeepsItsCasesAndResumesToTheUninterruptedReport) {
  std::ofstream(p("long.txt"))
      << "vae.decode,vae.encode model=tiny-kl,tiny-taesd res=32:96:8x64 w=f16,bf16 a=f16 acc=f32\n";
  const std::string run = std::string(TWINPATH_BINARY) + " run --jobs 2 --suite " + p("long.txt");
  // Started with its output on a pipe, and sent SIGTERM once three cases have printed.
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::unsetenv("OMP_WAIT_POLICY");  // as a user's shell has it: twinpath sets it for itself
    const std::string command = "exec " + run + " --report " + p("stopped.h5");
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  FILE* lines = ::fdopen(out[0], "r");
  char line[4096];
  std::string printed;
  int cases_printed = 0;
  while (std::fgets(line, sizeof line, lines)) {
    printed += line;
    if (std::string(line).rfind("PASSED", 0) == 0 && ++cases_printed == 3) {
      // Its OpenMP threads wait passively (harness/cli/main.cpp ran it again with the policy set,
      // keeping its pid): they do not spin on the cores a neighbour needs.
      const std::string environ = read_text("/proc/" + std::to_string(pid) + "/environ");
      EXPECT_NE(environ.find(std::string("OMP_WAIT_POLICY=passive") + '\0'), std::string::npos);
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGTERM);
    }
  }
  std::fclose(lines);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << printed;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << printed;
  EXPECT_NE(printed.find("interrupted by SIGTERM after "), std::string::npos) << printed;

  auto stopped = read_h5_report(p("stopped.h5"));
  ASSERT_TRUE(stopped.ok()) << stopped.error().message();
  EXPECT_TRUE(stopped->incomplete);
  ASSERT_FALSE(stopped->not_run.empty()) << "the run finished before the signal";
  EXPECT_GE(stopped->cases.size(), 3u);
  EXPECT_EQ(stopped->cases.size() + stopped->not_run.size(), 72u);
  // Neither shown nor merged as if it were whole.
  const auto shown = twinpath("report show " + p("stopped.h5"));
  EXPECT_EQ(shown.code, 1);
  EXPECT_NE(shown.output.find("INCOMPLETE: " + std::to_string(stopped->not_run.size()) +
                              " cases not run"),
            std::string::npos)
      << shown.output;
  const auto merged = twinpath("report merge " + p("stopped.h5") + " --out " + p("m.h5"));
  EXPECT_EQ(merged.code, 2);
  EXPECT_NE(merged.output.find("is incomplete"), std::string::npos) << merged.output;

  // Resumed as it ran: a fault, a model or another run option given anew is refused.
  for (const std::string extra : {" --inject softmax-no-max", " --model tiny-taesd"}) {
    const auto refused = twinpath("run --resume " + p("stopped.h5") + extra);
    EXPECT_EQ(refused.code, 2) << refused.output;
    EXPECT_NE(refused.output.find("leave out --model, --inject and --reseed"), std::string::npos)
        << refused.output;
  }
  const auto other_mem = twinpath("run --resume " + p("stopped.h5") + " --mem 1GiB");
  EXPECT_EQ(other_mem.code, 2) << other_mem.output;
  EXPECT_NE(other_mem.output.find("as it ran them, without --mem: leave out --mem"),
            std::string::npos)
      << other_mem.output;
  const auto resumed = twinpath("run --jobs 2 --resume " + p("stopped.h5"));
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  const auto whole =
      twinpath("run --jobs 2 --suite " + p("long.txt") + " --report " + p("whole.h5"));
  EXPECT_EQ(whole.code, 0) << whole.output;
  auto a = read_h5_report(p("stopped.h5"));
  auto b = read_h5_report(p("whole.h5"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->incomplete);
  EXPECT_TRUE(a->not_run.empty());
  EXPECT_EQ(a->command_line, "twinpath " + run.substr(run.find("run ")) + " --report " +
                                 p("stopped.h5"));  // the interrupted run's, not the resume's
  ASSERT_EQ(a->cases.size(), b->cases.size());
  for (std::size_t i = 0; i < a->cases.size(); ++i) {
    const CaseResult &x = a->cases[i], &y = b->cases[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.ordinal, y.ordinal);
    EXPECT_EQ(x.outcome, y.outcome) << x.id;
    ASSERT_EQ(x.checkpoints.size(), y.checkpoints.size()) << x.id;
    for (std::size_t k = 0; k < x.checkpoints.size(); ++k)
      EXPECT_EQ(x.checkpoints[k].accumulated.rel_l2, y.checkpoints[k].accumulated.rel_l2)
          << x.id << " @ " << x.checkpoints[k].name;
  }
  const auto again = twinpath("run --resume " + p("stopped.h5"));
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.output.find("is a complete report: every case ran; nothing to resume"),
            std::string::npos)
      << again.output;
}

// "K/N" has one parser (harness/core/shard.h) for --shard and for report merge.
TEST(ShardSpec, AcceptsKOfNAndNothingElse) {
  for (const char* good : {"0/1", "2/3", "11/12"}) EXPECT_TRUE(parse_shard_spec(good)) << good;
  EXPECT_EQ(parse_shard_spec("2/3")->index, 2);
  EXPECT_EQ(parse_shard_spec("2/3")->total, 3);
  for (const char* bad :
       {"3/3", "1/0", "-1/2", "+1/2", " 1/2", "a/2", "1/", "/2", "1/2/3", "1", "", "99999999999/2"})
    EXPECT_FALSE(parse_shard_spec(bad)) << bad;
}

}  // namespace
}  // namespace tp
