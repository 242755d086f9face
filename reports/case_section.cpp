#include "reports/case_section.h"

#include <algorithm>
#include <cmath>

#include "harness/core/format.h"
#include "reports/margins.h"
#include "reports/svg_plot.h"

namespace tp {
namespace {

constexpr std::size_t kWorstTableRows = 10;
constexpr std::size_t kPathHead = 12, kPathTail = 3;  // non-finite path rows listed

std::string esc(const std::string& s) { return markup_escape(s); }
std::string sci(double v) { return printf_numbers("%.3g", v); }

std::string fact(const std::string& name, const std::string& value) {
  return "<tr><th>" + esc(name) + "</th><td class=\"l\">" + esc(value) + "</td></tr>\n";
}

std::string facts_table(const CaseResult& c) {
  std::string t = "<table class=\"facts\">\n" + fact("outcome", outcome_name(c.outcome)) +
                  fact("reason", c.reason) + fact("device", c.device) +
                  fact("time", sci(c.reference_seconds) + " s reference, " +
                                   sci(c.compiled_seconds) + " s compiled");
  if (c.peak_rss_bytes > 0)
    t += fact("memory", "peak resident " + sci(double(c.peak_rss_bytes) / (1 << 30)) + " GiB");
  if (!c.plan_stats.empty()) t += fact("plans", c.plan_stats);
  if (!c.input_search.empty()) t += fact("input search", c.input_search);
  return t + "</table>\n";
}

// The provenance of the first non-finite value, as a table a reader can quote.
std::string origin_block(const CaseResult& c) {
  const Provenance& p = c.provenance;
  if (!p.found) return "";
  std::string t = "<h4>Where the first non-finite value came from</h4>\n<table class=\"facts\">\n" +
                  fact("layer", (p.step.empty() ? "" : p.step + "/") + p.layer) + fact("op", p.op) +
                  fact("cause", p.cause) + fact("what happened", p.detail) +
                  fact("element", format_index(p.index)) +
                  fact("compiled value", format_number(p.value)) +
                  fact("reference value", format_number(p.reference_value)) +
                  fact("max |reference| over the op's output", format_number(p.reference_max_abs));
  if (!p.stored_layer.empty())
    t +=
        fact("stored at", p.stored_layer + " (" + p.stored_op + "), later in the same fused group");
  if (p.dtype_max > 0)
    t += fact("headroom", "the dtype's largest finite " + format_number(p.dtype_max) + " / max " +
                              "|reference| = " + sci(p.dtype_max / p.reference_max_abs) +
                              (p.dtype_max < p.reference_max_abs ? " (below 1: the reference "
                                                                   "itself leaves the range)"
                                                                 : ""));
  for (const auto& [name, value] : p.inputs) t += fact("input " + name, format_number(value));
  return t + "</table>\n";
}

std::string path_row(const CheckpointRecord& r) {
  return "<li><code>" + esc(r.name) + "</code> (" + esc(r.op_class) +
         "): " + std::to_string(r.accumulated.non_finite_got) + " non-finite, " +
         std::to_string(r.accumulated.non_finite_new) + " where the reference is finite</li>\n";
}

// The checkpoints holding non-finite values, from the origin to the output.
std::string path_block(const CaseResult& c) {
  std::vector<const CheckpointRecord*> path;
  for (const CheckpointRecord& r : c.checkpoints)
    if (r.accumulated.non_finite_new > 0 && r.op_class != "seam" && r.op_class != "interior")
      path.push_back(&r);
  if (path.empty()) return "";
  std::string s = "<h4>The path the non-finite values took (" + std::to_string(path.size()) +
                  " layers)</h4>\n<ol class=\"path\">\n";
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i == kPathHead && path.size() > kPathHead + kPathTail) {
      s += "<li class=\"gap\">… " + std::to_string(path.size() - kPathHead - kPathTail) +
           " more …</li>\n";
      i = path.size() - kPathTail;
    }
    s += path_row(*path[i]);
  }
  return s + "</ol>\n" + non_finite_plot(c);
}

std::string search_block(const CaseResult& c) {
  if (!c.searched && c.keep_fp32.empty()) return "";
  std::string s = "<h4>What to keep in fp32</h4>\n";
  if (c.keep_fp32.empty())
    return s + "<p>" + (c.search_note.rfind("not searched", 0) == 0 ? "" : "None found: ") +
           esc(c.search_note) + "</p>\n";
  s += "<p>" +
       std::string(c.search_runs > 0 ? "The precision search's answer, verified by rerunning"
                                     : "Not verified by a rerun (the user's stack made these "
                                       "values)") +
       " (" + esc(c.search_note) + "):</p>\n<pre class=\"copy\">--keep-fp32 '" +
       esc(join_list(c.keep_fp32, ',')) + "'</pre>\n";
  return s;
}

std::string repro_block(const CaseResult& c) {
  if (c.repro.empty() && c.repro_file.empty()) return "";
  std::string s = "<h4>Rerun it</h4>\n";
  if (!c.repro.empty()) s += "<pre class=\"copy\">" + esc(c.repro) + "</pre>\n";
  if (!c.repro_file.empty())
    s += "<p>The origin's group alone:</p><pre class=\"copy\">twinpath replay " +
         esc(shell_quote(c.repro_file)) + "</pre>\n";
  return s;
}

// The checkpoints nearest their bounds, with what they were judged by.
std::string worst_table(const CaseResult& c) {
  const std::vector<const CheckpointRecord*> rows = nearest_bounds(c, kWorstTableRows);
  if (rows.empty()) return "";
  std::string s =
      "<h4>The layers nearest their bounds</h4>\n<table><tr><th>#</th><th "
      "class=\"l\">layer</th><th>op class</th><th>stored</th><th>judged</th><th>error</th>"
      "<th>tolerance</th><th>margin</th><th>accumulated rel L2</th><th>headroom</th><th>bias "
      "(ULPs)</th></tr>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CheckpointMargin m = *checkpoint_margin(*rows[i]);
    const CheckpointRecord& r = *rows[i];
    s += std::string(r.passed ? "<tr>" : "<tr class=\"bad\">") + "<td>" + std::to_string(i + 1) +
         "</td><td class=\"l\">" + esc(r.name) + "</td><td>" + esc(r.op_class) + "</td><td>" +
         esc(r.dtype) + "</td><td>" + (m.local ? "local " : "accumulated ") + esc(m.measure) +
         "</td><td>" + (m.measure == "non-finite" ? "–" : sci(m.error)) + "</td><td>" +
         sci(m.tolerance) + "</td><td>" +
         (std::isinf(m.margin) ? "no error"
          : m.margin == 0      ? "broken"
                               : "x" + sci(m.margin)) +
         "</td><td>" + sci(r.accumulated.rel_l2) + "</td><td>" + sci(r.accumulated.headroom) +
         "</td><td>" + sci((m.local ? r.local : r.accumulated).bias_ulp) + "</td></tr>\n";
  }
  return s +
         "</table>\n<p class=\"note\">margin: the factor the judged error may still grow by "
         "before it breaks its tolerance (docs/tolerances.md).</p>\n";
}

}  // namespace

std::vector<const CheckpointRecord*> nearest_bounds(const CaseResult& c, std::size_t n) {
  std::vector<std::pair<double, const CheckpointRecord*>> rows;
  for (const CheckpointRecord& r : c.checkpoints)
    if (r.op_class != "seam" && r.op_class != "interior")
      if (const auto m = checkpoint_margin(r)) rows.emplace_back(m->margin, &r);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const CheckpointRecord*> out;
  for (std::size_t i = 0; i < rows.size() && i < n; ++i) out.push_back(rows[i].second);
  return out;
}

std::string case_section_html(const CaseResult& c, const std::string& anchor) {
  std::string s = "<section class=\"case " + std::string(outcome_name(c.outcome)) + "\" id=\"" +
                  esc(anchor) + "\">\n<h3>" + outcome_name(c.outcome) + " <code>" + esc(c.id) +
                  "</code></h3>\n" + facts_table(c) + origin_block(c) + path_block(c) +
                  search_block(c) + repro_block(c);
  if (!c.checkpoints.empty())
    s += error_profile_plot(c) + worst_table(c) + step_plot(c) + tile_plot(c) + headroom_plot(c) +
         bias_plot(c);
  return s + "<p><a href=\"#summary\">back to the summary</a></p>\n</section>\n";
}

}  // namespace tp
