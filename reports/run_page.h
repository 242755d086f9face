// A run's or a triage's report as one self-contained HTML page (inline SVG, no scripts, no
// network): the run's summary (outcomes per reason, the cases nearest their bounds, regressions
// against a baseline with their growth) linking a section per case (reports/case_section.h).
// Made from the report alone, so `twinpath report page` draws any report, old or new.
#pragma once

#include <string>

#include "reports/report.h"

namespace tp {

struct PageOptions {
  std::string case_id;   // only this case (its id as `report show` prints it)
  bool failing = false;  // only the cases that did not pass
  // Regressions against this baseline (a report or a baseline file), flagged as `report diff`
  // flags them.
  const RunReport* baseline = nullptr;
  std::string baseline_name;
  double growth = 2;
};

// A page draws a section for every case with checkpoints when there are at most this many;
// past it, for the cases that did not pass (at most kPageMaxSections) and the kPageWorstPassing
// passing ones nearest their bounds (the summary lists every case and says how to draw another).
constexpr std::size_t kPageAllCases = 40, kPageWorstPassing = 10;
// At most this many cases that did not pass get a section (a kernel change that fails hundreds
// would make a page of hundreds of megabytes): one of each kind of reason first, then the
// non-finite ones, then those nearest their bounds.
constexpr std::size_t kPageMaxSections = 50;

Expected<std::string> run_page_html(const RunReport& report, const PageOptions& options);

// Makes the page's folder, or says in one sentence why it cannot (run and triage call it before
// they start, so a wrong --page costs no run).
Status make_page_folder(const std::string& dir);

// Writes DIR/report.html atomically (DIR made when missing) and returns its path.
Expected<std::string> write_run_page(const std::string& dir, const RunReport& report,
                                     const PageOptions& options);

}  // namespace tp
