// One run's report in memory: what the HDF5 file holds (docs/report-schema.md), and what
// JUnit, the terminal summary, `report diff` and `report merge` are made from.
#pragma once

#include <string>
#include <vector>

#include "reports/result.h"

namespace tp {

constexpr int kReportSchemaVersion = 1;

struct RunReport {
  int schema_version = kReportSchemaVersion;
  std::string tool_version, git_commit, command_line, host, device, utc_time;
  // How the device ran plans where a case did not say: "kernels=fused graphs=on" on CUDA, ""
  // on the CPU emulation (and in reports made before it was recorded).
  std::string backend;
  std::string shard;  // "K/N" for a shard's report, "" for a whole run (or a merge)
  std::vector<CaseResult> cases;
  // A run stopped by SIGINT/SIGTERM (a scheduler's time limit) after the cases in progress: the
  // ids of the cases it did not run, with their ordinals (`run --resume` runs them).
  bool incomplete = false;
  std::vector<std::pair<int64_t, std::string>> not_run;
};

// Host name, UTC time (ISO 8601) for a new report.
std::string host_name();
std::string utc_now();

// Counts per outcome: "12 passed, 1 failed, 1 mistrusted, 2 unsupported" -- always leading with
// passed and failed, so every summary ends with `N passed, N failed` when nothing else happened.
std::string outcome_counts(const std::vector<CaseResult>& cases);
// The terminal lines for one case: its outcome and id, and for a non-passing case the reason,
// the NaN origin, the suggested --keep-fp32 list and the repro.
std::string case_lines(const CaseResult& r);
// Expected refusals (UNSUPPORTED) counted per reason in one line, so they do not bury the lines a
// reviewer needs: "164 refused as unsupported (each in the report and JUnit): 108 cannot
// accumulate in f16 (18 dtype pairs); 56 is not a combination the compiled path has kernels for
// (w=f16,a=bf16 x34, ...)". A reason's layer prefix and advice are left out of the grouping.
// "" when there are none.
std::string refusal_summary(const std::vector<CaseResult>& cases);
// The drawn-config cases (model=random:FAMILY:SEED) whose input search ran, per family: "input
// search: 2 of 480 drawn cases needed a scaled input (autoencoder_kl 2), 0 found none". ""
// when the cases hold no drawn config.
std::string input_search_summary(const std::vector<CaseResult>& cases);
// Whether a run with these cases exits 1 (a case failed, errored, or found a NaN).
bool any_failure(const std::vector<CaseResult>& cases);

// JUnit XML (one testsuite, a testcase per case; FAILED -> failure, ERROR -> error,
// SKIPPED/UNSUPPORTED -> skipped), written atomically.
Status write_junit(const std::string& path, const RunReport& report);

}  // namespace tp
