// The markdown summary of `twinpath selftest` a GPU owner shares: where it ran, the verdict, the
// numerics contract's totals and one row per case with its outcome, times and checkpoints.
#pragma once

#include <string>

#include "reports/report.h"

namespace tp {

// `device` describes the GPU and its driver, CUDA and cuDNN versions (the caller's words).
std::string selftest_summary(const RunReport& report, bool passed, const std::string& device);

}  // namespace tp
