// One case's section of a run's page (reports/run_page.h): the error along execution order
// against the tolerance band with the worst layers named, per denoising step and per tile, the
// activation dtype's headroom and the rounding bias per layer; for a non-finite case the origin
// and the path its values took to the output; the precision search's answer; the repro line.
#pragma once

#include <string>
#include <vector>

#include "reports/result.h"

namespace tp {

// `anchor` is the section's HTML id, which the run's summary links to.
std::string case_section_html(const CaseResult& c, const std::string& anchor);

// The checkpoints with a tolerance, nearest their bounds first (reports/margins.h), at most `n`;
// seam and interior rows (reported, not judged) left out. The error plot numbers them as the
// table lists them.
std::vector<const CheckpointRecord*> nearest_bounds(const CaseResult& c, std::size_t n);

// Inline SVG plots of one case's checkpoints (reports/case_plots.cpp); each is "" when the case
// has nothing of its kind (no denoising steps, no tiles, no non-finite value).
std::string error_profile_plot(const CaseResult& c);
std::string step_plot(const CaseResult& c);
std::string tile_plot(const CaseResult& c);
std::string headroom_plot(const CaseResult& c);
std::string bias_plot(const CaseResult& c);
std::string non_finite_plot(const CaseResult& c);

}  // namespace tp
