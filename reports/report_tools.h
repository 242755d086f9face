// `report diff` and `report merge`: reviewing a kernel change against a baseline run, and
// joining shard reports into the report one unsharded run would have written.
#pragma once

#include <string>
#include <vector>

#include "reports/report.h"

namespace tp {

struct DiffFinding {
  std::string case_id;
  std::string checkpoint;  // "" for the case as a whole
  std::string what;        // one sentence
  double factor = 0;       // the rel L2 growth factor of a growth finding (0 for the others)
};

struct DiffOptions {
  double ratio = 2;     // flag error that grew by more than this factor...
  double floor = 1e-6;  // ...measured from at least this much (rel L2), so fp32 noise is not growth
};

// Cases in both reports (matched by id, injected faults left out: a run with --inject is held to
// the clean baseline), checkpoint by checkpoint: error growth past the ratio (accumulated or
// local rel L2, even under tolerance), any new non-finite value, and a worse outcome.
std::vector<DiffFinding> diff_reports(const RunReport& base, const RunReport& next,
                                      const DiffOptions& options);
// Cases only in one of the two (not findings: a suite may have grown).
std::vector<std::string> unmatched_cases(const RunReport& base, const RunReport& next);

// Joins shard reports: cases in their unsharded order; a case in two inputs is refused.
Expected<RunReport> merge_reports(const std::vector<RunReport>& shards,
                                  const std::vector<std::string>& names);

}  // namespace tp
