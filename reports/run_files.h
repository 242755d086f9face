// Where a run's reports go when no --report is given, so that one run never replaces another's:
// out/runs/TIME.h5 and TIME.xml (the run's UTC start, to the second; TIME-2, TIME-3 for runs
// that started in the same second), out/latest.h5 and out/latest.xml linking the newest, and only
// the newest kKeptRuns runs kept.
#pragma once

#include <string>

#include "reports/report.h"

namespace tp {

constexpr int kKeptRuns = 10;

struct RunFiles {
  std::string report, junit;  // junit "" when not written
};

// Writes the report (and JUnit when `junit`) under `out` as above, each atomically, then points
// the latest links at them and removes older runs past kKeptRuns.
Expected<RunFiles> write_run_files(const std::string& out, const RunReport& report, bool junit);

}  // namespace tp
