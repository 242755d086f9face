// `twinpath selftest --device cuda`: one command for a GPU owner. The built-in suite `selftest`
// (small cases over every family, both CUDA kernel sets, CUDA graphs on and off, reload=on for
// the same bits in a fresh session) runs on the CUDA kernels with the numerics-contract check;
// the report (HDF5 and JUnit) and a short markdown summary go to --out.
#include <filesystem>
#include <iostream>
#include <map>

#include "compiled/device.h"
#include "harness/cli/commands.h"
#include "harness/core/atomic_file.h"
#include "harness/core/format.h"

namespace tp {
namespace {

struct ContractTotals {
  int64_t checkpoints = 0, decided = 0, ambiguous = 0, violations = 0;
};

ContractTotals contract_totals(const RunReport& r) {
  ContractTotals t;
  for (const CaseResult& c : r.cases)
    for (const CheckpointRecord& k : c.checkpoints)
      if (k.contract.checked) {
        ++t.checkpoints;
        t.decided += k.contract.decided;
        t.ambiguous += k.contract.ambiguous;
        t.violations += k.contract.violations;
      }
  return t;
}

// The summary a GPU owner shares: what ran where, the verdicts, and every case that did not pass.
Status write_summary(const std::string& path, const RunReport& r, int rc) {
  return write_file_atomically(path, [&](std::ostream& os) {
    const ContractTotals t = contract_totals(r);
    os << "# twinpath selftest\n\n"
       << "- verdict: " << (rc == 0 ? "PASS" : "FAIL") << " (" << outcome_counts(r.cases) << ")\n"
       << "- device: " << cuda_device_description(0) << "; " << cuda_versions() << "\n"
       << "- twinpath " << r.tool_version << ", commit " << r.git_commit << "; host " << r.host
       << "; " << r.utc_time << "\n"
       << "- command: `" << r.command_line << "`\n"
       << "- numerics contract: " << t.checkpoints << " checkpoints checked, " << t.decided
       << " elements decided, " << t.ambiguous << " ambiguous, " << t.violations
       << " violations\n\n";
    os << "| case | outcome | why |\n|---|---|---|\n";
    for (const CaseResult& c : r.cases)
      if (c.outcome != Outcome::kPassed)
        os << "| `" << c.id << "` | " << outcome_name(c.outcome) << " | " << c.reason << " |\n";
    return Status();
  });
}

}  // namespace

Expected<int> selftest_command(const SelftestOptions& o, const std::string& command_line) {
  if (o.device != "cuda")
    return Error(
        "selftest checks a GPU's CUDA kernels: give --device cuda (`twinpath run --suite "
        "ci` checks the CPU's emulated kernels)");
  if (cuda_device_count() == 0)
    return Error("selftest --device cuda: no CUDA device is visible to this process (" +
                 cuda_versions() +
                 "); run it on a machine whose NVIDIA GPU and driver nvidia-smi lists, or check "
                 "the emulated kernels with `twinpath run --suite ci`");
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) return Error("--out " + o.out + ": cannot make the folder (" + ec.message() + ")");
  RunCommandOptions r;
  r.suite = "selftest";
  r.device = "cuda";
  r.report = o.out + "/selftest.h5";
  r.junit = o.out + "/selftest.xml";
  TP_ASSIGN_OR_RETURN(const int rc, run_command(r, command_line));
  TP_ASSIGN_OR_RETURN(const RunReport report, read_report_file(r.report));
  const std::string summary = o.out + "/summary.md";
  TP_RETURN_IF_ERROR(write_summary(summary, report, rc));
  std::cout << "summary: " << summary << "\n";
  return rc;
}

}  // namespace tp
