// Tradeoff reports (`twinpath tradeoff`): report.h5 with every measured number, and report.html,
// one self-contained page (inline SVG, no scripts, no network) for people: error against time
// per policy with the Pareto front, per-layer error profiles, per-layer f16 headroom, and the
// table of numbers. Both written atomically. Schema: docs/tradeoff-report.md.
#pragma once

#include <string>

#include "reports/report.h"
#include "reports/tradeoff_result.h"

namespace tp {

// `header` carries the tool version, commit, command line, host and time (its cases are unused).
Status write_tradeoff_h5(const std::string& path, const Tradeoff& t, const RunReport& header);
Status write_tradeoff_html(const std::string& path, const Tradeoff& t, const RunReport& header);

// The policies on the Pareto front of one resolution, by index into t.points, fastest (by
// median) first. A policy is off the front only when another is at least as accurate and its
// slowest timed run was faster than this one's fastest: timings that overlap decide nothing on a
// shared machine.
std::vector<std::size_t> pareto_front(const Tradeoff& t, const std::string& resolution);

}  // namespace tp
