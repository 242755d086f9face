// `twinpath report show|diff|merge`: on the reports and the core only (no Eigen, LibTorch or
// CUDA), so a machine that only reviews reports links none of the engine.
#pragma once

#include <string>
#include <vector>

#include "harness/core/status.h"

namespace tp {

Expected<int> report_show_command(const std::string& path, bool json);
Expected<int> report_diff_command(const std::string& base, const std::string& next, double ratio);
// A report's summary as a baseline file (reports/baseline.h).
Expected<int> report_baseline_command(const std::string& report, const std::string& out);
Expected<int> report_merge_command(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace tp
