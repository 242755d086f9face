// The run report as HDF5 (docs/report-schema.md): written atomically (a temporary file beside
// the target, renamed into place once complete), read back for `report show|diff|merge`.
#pragma once

#include <string>

#include "reports/report.h"

namespace tp {

Status write_h5_report(const std::string& path, const RunReport& report);
Expected<RunReport> read_h5_report(const std::string& path);

}  // namespace tp
