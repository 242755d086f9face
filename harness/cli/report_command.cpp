// `twinpath report show|diff|baseline|merge`.
#include "harness/cli/report_command.h"

#include <iostream>

#include "reports/baseline.h"
#include "reports/h5_report.h"
#include "reports/json_report.h"
#include "reports/report_tools.h"

namespace tp {

Expected<int> report_show_command(const std::string& path, bool json) {
  TP_ASSIGN_OR_RETURN(RunReport r, read_h5_report(path));
  if (json) {
    std::cout << run_json(r).dump(2) << "\n";
    return any_failure(r.cases) || r.incomplete ? 1 : 0;
  }
  std::cout << path << ": twinpath " << r.tool_version << " (" << r.git_commit << ") on " << r.host
            << ", " << r.device << ", " << r.utc_time
            << (r.shard.empty() ? "" : ", shard " + r.shard) << "\n  " << r.command_line << "\n";
  for (const CaseResult& c : r.cases) std::cout << case_lines(c);
  std::cout << outcome_counts(r.cases) << "\n";
  if (r.incomplete)
    std::cout << "INCOMPLETE: " << r.not_run.size()
              << " cases not run (the run was interrupted); `twinpath run --resume " << path
              << "` runs them\n";
  return any_failure(r.cases) || r.incomplete ? 1 : 0;
}

Expected<int> report_diff_command(const std::string& base_path, const std::string& new_path,
                                  double ratio) {
  if (!(ratio > 1))
    return Error("--growth must be above 1 (it is the factor by which error may grow)");
  TP_ASSIGN_OR_RETURN(RunReport base, read_report_or_baseline(base_path));
  TP_ASSIGN_OR_RETURN(RunReport next, read_report_or_baseline(new_path));
  const std::vector<DiffFinding> findings = diff_reports(base, next, DiffOptions{ratio});
  for (const DiffFinding& f : findings)
    std::cout << "GREW        " << f.case_id << (f.checkpoint.empty() ? "" : " @ " + f.checkpoint)
              << "\n    " << f.what << "\n";
  for (const std::string& u : unmatched_cases(base, next)) std::cout << "note: " << u << "\n";
  std::cout << findings.size() << " regressions (error growth past x" << ratio
            << ", new non-finite values, worse outcomes)\n";
  return findings.empty() ? 0 : 1;
}

Expected<int> report_baseline_command(const std::string& report_path, const std::string& out) {
  TP_ASSIGN_OR_RETURN(RunReport report, read_h5_report(report_path));
  TP_RETURN_IF_ERROR(write_baseline(out, report));
  std::cout << "baseline of " << report.cases.size() << " cases written to " << out << "\n";
  return 0;
}

Expected<int> report_merge_command(const std::vector<std::string>& inputs, const std::string& out) {
  std::vector<RunReport> shards;
  for (const std::string& path : inputs) {
    TP_ASSIGN_OR_RETURN(RunReport r, read_h5_report(path));
    shards.push_back(std::move(r));
  }
  TP_ASSIGN_OR_RETURN(RunReport merged, merge_reports(shards, inputs));
  TP_RETURN_IF_ERROR(write_h5_report(out, merged));
  std::cout << "merged " << inputs.size() << " reports into " << out << ": "
            << outcome_counts(merged.cases) << "\n";
  return 0;
}

}  // namespace tp
