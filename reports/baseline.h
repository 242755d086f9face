// A run's summary as a baseline kept with the sources (cases/baselines/ci.txt.gz): per case its
// outcome, its plans' facts (groups, arena bytes, rounding points) and per checkpoint the
// accumulated and local rel L2 (3 significant digits) and new non-finite count; no tensors.
// `twinpath run --baseline FILE` and `report diff` read it like a report, so error growth,
// worse outcomes and changed plans against it are findings. Text, one line per fact, so a
// refresh is reviewed as a diff (tools/refresh-baseline.sh prints it). A path ending in .gz is
// written gzipped (ci's text passed 5 MB); the reader takes either, by the file's first bytes.
//   twinpath-baseline 1
//   case <TAB> ID <TAB> OUTCOME
//   plan <TAB> GRAPH SHAPE <TAB> GROUPS <TAB> ARENA_BYTES <TAB> ROUNDING_POINTS
//   cp <TAB> NAME <TAB> ACCUMULATED_REL_L2 <TAB> LOCAL_REL_L2 or - <TAB> NONFINITE_NEW
#pragma once

#include <string>

#include "reports/report.h"

namespace tp {

Status write_baseline(const std::string& path, const RunReport& report);
Expected<RunReport> read_baseline(const std::string& path);
// A baseline file or an HDF5 report, whichever `path` holds.
Expected<RunReport> read_report_or_baseline(const std::string& path);

}  // namespace tp
