// The one JSON object `--json` prints (run: every case's verdict and worst checkpoint; triage:
// one case with its origin and the suggested fp32 overrides; report diff: the regressions).
#pragma once

#include <nlohmann/json.hpp>

#include "reports/report.h"
#include "reports/report_tools.h"

namespace tp {

nlohmann::json case_json(const CaseResult& c);
nlohmann::json run_json(const RunReport& r);
// `report diff --json`: the findings, the cases only one report has, and the ratio used.
nlohmann::json diff_json(const std::vector<DiffFinding>& findings,
                         const std::vector<std::string>& unmatched, double ratio);

}  // namespace tp
