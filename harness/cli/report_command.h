// `twinpath report show|diff|merge`: on the reports and the core only (no Eigen, LibTorch or
// CUDA), so a machine that only reviews reports links none of the engine.
#pragma once

#include <string>
#include <vector>

#include "harness/core/status.h"
#include "reports/report.h"

namespace tp {

// A report (or, with `baseline_too`, a text baseline) as the commands read it. libhdf5 1.10 loops
// forever on some damaged files (HDFGroup/hdf5 issue 1707, found by fuzzing: docs/fuzzing.md);
// a read that has not finished in TWINPATH_REPORT_READ_SECONDS (default 5 s and 1 s per MiB)
// ends the process with exit code 2 and a sentence naming the file, instead of hanging; a crash
// inside the read (libhdf5 also reads past its buffers on some damaged files) does the same
// instead of dumping core.
Expected<RunReport> read_report_file(const std::string& path, bool baseline_too = false);

// Each case's outcome and its checkpoint nearest the tolerance (every checkpoint with `layers`).
Expected<int> report_show_command(const std::string& path, bool json, bool layers);
Expected<int> report_diff_command(const std::string& base, const std::string& next, double ratio,
                                  bool json);
// A report's summary as a baseline file (reports/baseline.h).
Expected<int> report_baseline_command(const std::string& report, const std::string& out);
// The report as a page (reports/run_page.h) in `out`/report.html.
Expected<int> report_page_command(const std::string& report, const std::string& out,
                                  const std::string& case_id, bool failing,
                                  const std::string& baseline, double growth);
Expected<int> report_merge_command(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace tp
