// The one JSON object `--json` prints (run: every case's verdict; triage: one case with its
// origin and the suggested fp32 overrides).
#pragma once

#include <nlohmann/json.hpp>

#include "reports/report.h"

namespace tp {

nlohmann::json case_json(const CaseResult& c);
nlohmann::json run_json(const RunReport& r);

}  // namespace tp
