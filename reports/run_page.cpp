#include "reports/run_page.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "reports/case_section.h"
#include "reports/margins.h"
#include "reports/report_tools.h"
#include "reports/svg_plot.h"

namespace tp {
namespace {

constexpr std::size_t kWorstCases = 10, kReasonExamples = 3, kFindingsListed = 40;

std::string esc(const std::string& s) { return markup_escape(s); }

const char* const kStyle =
    "<style>body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0}td,th{border:1px solid "
    "#ccc;padding:3px 7px;text-align:right;vertical-align:top}th{background:#f2f2f2}"
    ".l,table.facts td{text-align:left}table.facts th{text-align:left;white-space:nowrap}"
    "tr.bad td{background:#fbe9e9}.note,figcaption{color:#555;font-size:13px;max-width:1000px}"
    "figure{margin:14px 0}pre.copy{background:#f6f6f6;border:1px solid #ddd;padding:6px;"
    "white-space:pre-wrap;word-break:break-all;user-select:all}section.case{border-top:3px solid "
    "#bbb;margin-top:28px}section.FAILED,section.ERROR{border-top-color:#be0032}"
    "section.MISTRUSTED{border-top-color:#f38400}code{font-size:13px}ol.path{font-size:13px}"
    "</style>";

bool drawable(const CaseResult& c) { return !c.checkpoints.empty() || c.provenance.found; }
bool passed(const CaseResult& c) { return c.outcome == Outcome::kPassed; }
bool not_passed(const CaseResult& c) {
  return c.outcome == Outcome::kFailed || c.outcome == Outcome::kError ||
         c.outcome == Outcome::kMistrusted;
}
double case_margin(const CaseResult& c) {
  const auto m = worst_checkpoint(c);
  return m ? m->margin : INFINITY;
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The checkpoint a reason starts with ("tile0/post_quant_conv: biased rounding: ..."), or "".
std::string reason_place(const std::string& reason) {
  const std::size_t colon = reason.find(": ");
  return colon != std::string::npos && reason.find(' ') > colon ? reason.substr(0, colon) : "";
}

// A reason without the checkpoint it starts with and with its numbers left out, so the failures
// of one kind group together ("conv_in: rel L2 3.1e-03 exceeds 1.5e-03" -> "rel L2 # exceeds #");
// numbers inside names stay.
std::string reason_kind(const std::string& reason) {
  const std::string place = reason_place(reason);
  const std::string text = place.empty() ? reason : reason.substr(place.size() + 2);
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const bool after_name = i > 0 && name_char(text[i - 1]);
    const bool starts =
        !after_name &&
        (digit(text[i]) || (text[i] == '-' && i + 1 < text.size() && digit(text[i + 1])));
    if (!starts) {
      out += text[i++];
      continue;
    }
    for (++i; i < text.size() &&
              (digit(text[i]) || std::string_view(".e+-").find(text[i]) != std::string_view::npos);)
      ++i;
    // An index's numbers become one: [0,0,3] and [0,0,0,7] are the same kind.
    if (out.size() >= 2 && out.compare(out.size() - 2, 2, "#,") == 0)
      out.pop_back();
    else
      out += '#';
  }
  return out;
}

// A case's outcome and kind of reason: what the outcomes table groups by.
std::string case_kind(const CaseResult& c) {
  return std::string(outcome_name(c.outcome)) + ": " + reason_kind(c.reason);
}

// The first `n` of `order` after a stable sort by `before`.
template <typename Less>
std::vector<std::size_t> first_by(std::vector<std::size_t> order, std::size_t n, Less before) {
  std::stable_sort(order.begin(), order.end(), before);
  if (order.size() > n) order.resize(n);
  return order;
}

// Of more non-passing cases than a page holds: one of each kind of reason (the examples the
// outcomes table links), then the non-finite ones, then the nearest their bounds.
std::vector<std::size_t> worst_failing(const std::vector<CaseResult>& cases,
                                       std::vector<std::size_t> failing) {
  std::vector<std::size_t> chosen;
  std::vector<std::string> kinds;
  for (std::size_t i : failing) {
    const std::string kind = case_kind(cases[i]);
    if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end()) continue;
    kinds.push_back(kind);
    if (chosen.size() < kPageMaxSections) chosen.push_back(i);
  }
  failing.erase(std::remove_if(failing.begin(), failing.end(),
                               [&](std::size_t i) {
                                 return std::find(chosen.begin(), chosen.end(), i) != chosen.end();
                               }),
                failing.end());
  for (std::size_t i :
       first_by(failing, kPageMaxSections - chosen.size(), [&](std::size_t a, std::size_t b) {
         const bool na = cases[a].provenance.found, nb = cases[b].provenance.found;
         return na != nb ? na : case_margin(cases[a]) < case_margin(cases[b]);
       }))
    chosen.push_back(i);
  return chosen;
}

// Which cases get a section, by index.
Expected<std::vector<bool>> sections(const RunReport& report, const PageOptions& o) {
  const std::vector<CaseResult>& cases = report.cases;
  std::vector<bool> drawn(cases.size(), false);
  if (!o.case_id.empty()) {
    auto it = std::find_if(cases.begin(), cases.end(),
                           [&](const CaseResult& c) { return c.id == o.case_id; });
    if (it == cases.end())
      return Error("the report has no case '" + o.case_id +
                   "'; `twinpath report show REPORT` lists its cases' ids");
    drawn[std::size_t(it - cases.begin())] = true;
    return drawn;
  }
  std::vector<std::size_t> all, failing, passing;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!drawable(cases[i])) continue;
    all.push_back(i);
    if (not_passed(cases[i])) failing.push_back(i);
    if (passed(cases[i])) passing.push_back(i);
  }
  if (!o.failing && all.size() <= kPageAllCases) failing = all;
  if (failing.size() > kPageMaxSections) failing = worst_failing(cases, failing);
  for (std::size_t i : failing) drawn[i] = true;
  if (o.failing || all.size() <= kPageAllCases) return drawn;
  for (std::size_t i : first_by(passing, kPageWorstPassing, [&](std::size_t a, std::size_t b) {
         return case_margin(cases[a]) < case_margin(cases[b]);
       }))
    drawn[i] = true;
  return drawn;
}

std::string anchor(std::size_t i) { return "case-" + std::to_string(i); }

// A case's id, linked to its section where the page has one.
std::string case_link(const RunReport& r, const std::vector<bool>& drawn, std::size_t i) {
  const std::string id = "<code>" + esc(r.cases[i].id) + "</code>";
  return drawn[i] ? "<a href=\"#" + anchor(i) + "\">" + id + "</a>" : id;
}

std::string header(const RunReport& r) {
  std::string s = "<h1>twinpath report: " + esc(outcome_counts(r.cases)) +
                  "</h1>\n<p class=\"note\">" + "twinpath " + esc(r.tool_version) + " (" +
                  esc(r.git_commit) + ") on " + esc(r.host) + ", " + esc(r.device) +
                  (r.backend.empty() ? "" : ", " + esc(r.backend)) + ", " + esc(r.utc_time) +
                  (r.shard.empty() ? "" : ", shard " + esc(r.shard)) + ".<br><code>" +
                  esc(r.command_line) + "</code></p>\n";
  if (r.incomplete)
    s += "<p><b>Incomplete:</b> the run was stopped; " + std::to_string(r.not_run.size()) +
         " cases did not run (<code>twinpath run --resume REPORT</code> runs them).</p>\n";
  return s;
}

// Where the cases of one kind of reason failed, most often first: "post_quant_conv x51,
// encoder.conv_in x37, ... (12 places)".
std::string places_text(const std::vector<CaseResult>& cases, const std::vector<std::size_t>& of) {
  std::vector<std::pair<std::string, int>> places;
  for (std::size_t i : of) {
    const std::string place = reason_place(cases[i].reason);
    if (place.empty()) continue;
    auto it =
        std::find_if(places.begin(), places.end(), [&](const auto& p) { return p.first == place; });
    if (it == places.end()) it = places.insert(places.end(), {place, 0});
    ++it->second;
  }
  std::stable_sort(places.begin(), places.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (std::size_t k = 0; k < places.size() && k < kReasonExamples; ++k)
    text += (k ? ", " : "") + places[k].first + " x" + std::to_string(places[k].second);
  if (places.size() > kReasonExamples)
    text += ", ... (" + std::to_string(places.size()) + " places)";
  return text;
}

// Outcomes per reason: refusals as the terminal groups them, the rest by the kind of reason.
std::string outcome_block(const RunReport& r, const std::vector<bool>& drawn) {
  std::string s = "<h2>Outcomes</h2>\n";
  const std::string refused = refusal_summary(r.cases);
  if (!refused.empty()) s += "<p class=\"note\">" + esc(refused) + "</p>\n";
  std::vector<std::pair<std::string, std::vector<std::size_t>>> kinds;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    if (passed(r.cases[i]) || r.cases[i].outcome == Outcome::kUnsupported) continue;
    const std::string kind = case_kind(r.cases[i]);
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {kind, {}});
    it->second.push_back(i);
  }
  if (kinds.empty()) return s + "<p>Every case that ran passed.</p>\n";
  s += "<table><tr><th>cases</th><th class=\"l\">outcome: reason (numbers as #)</th><th "
       "class=\"l\">where</th><th class=\"l\">for example</th></tr>\n";
  for (const auto& [kind, members] : kinds) {
    std::string examples;
    for (std::size_t k = 0; k < members.size() && k < kReasonExamples; ++k)
      examples += (k ? "<br>" : "") + case_link(r, drawn, members[k]);
    s += "<tr class=\"bad\"><td>" + std::to_string(members.size()) + "</td><td class=\"l\">" +
         esc(kind) + "</td><td class=\"l\">" + esc(places_text(r.cases, members)) +
         "</td><td class=\"l\">" + examples + "</td></tr>\n";
  }
  return s + "</table>\n";
}

std::string worst_cases_block(const RunReport& r, const std::vector<bool>& drawn) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < r.cases.size(); ++i)
    if (worst_checkpoint(r.cases[i])) order.push_back(i);
  if (order.empty()) return "";
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return case_margin(r.cases[a]) < case_margin(r.cases[b]);
  });
  std::string s =
      "<h2>The cases nearest their bounds</h2>\n<table><tr><th>outcome</th><th "
      "class=\"l\">case</th><th class=\"l\">its checkpoint nearest its "
      "tolerance</th></tr>\n";
  for (std::size_t k = 0; k < order.size() && k < kWorstCases; ++k) {
    const CaseResult& c = r.cases[order[k]];
    s += std::string(passed(c) ? "<tr>" : "<tr class=\"bad\">") + "<td>" + outcome_name(c.outcome) +
         "</td><td class=\"l\">" + case_link(r, drawn, order[k]) + "</td><td class=\"l\">" +
         esc(margin_text(*worst_checkpoint(c))) + "</td></tr>\n";
  }
  return s + "</table>\n";
}

// One row per case: how many findings, the largest growth, and every finding in a
// collapsed list (a <details> element: no script).
std::string regression_row(const RunReport& r, const std::vector<bool>& drawn,
                           const std::map<std::string, std::size_t>& index,
                           const std::vector<const DiffFinding*>& findings) {
  const DiffFinding* largest = nullptr;
  std::string other, all;
  std::size_t listed = 0;
  for (const DiffFinding* f : findings) {
    if (f->factor > 0 && (!largest || f->factor > largest->factor)) largest = f;
    if (f->factor == 0)
      other += "<br>" + esc((f->checkpoint.empty() ? "" : f->checkpoint + ": ") + f->what);
    if (listed++ < kFindingsListed)
      all += "<li>" + esc((f->checkpoint.empty() ? "" : f->checkpoint + ": ") + f->what) + "</li>";
  }
  if (listed > kFindingsListed)
    all += "<li>… " + std::to_string(listed - kFindingsListed) +
           " more (`twinpath report diff` lists them all)</li>";
  const auto it = index.find(findings.front()->case_id);
  return "<tr class=\"bad\"><td class=\"l\">" +
         (it == index.end() ? esc(findings.front()->case_id) : case_link(r, drawn, it->second)) +
         "</td><td>" + std::to_string(findings.size()) + "</td><td class=\"l\">" +
         (largest ? esc(largest->checkpoint + ": " + largest->what) : "") + other +
         "<details><summary>every finding</summary><ul>" + all + "</ul></details></td></tr>\n";
}

std::string regressions_block(const RunReport& r, const std::vector<bool>& drawn,
                              const PageOptions& o) {
  if (!o.baseline) return "";
  const std::vector<DiffFinding> findings = diff_reports(*o.baseline, r, DiffOptions{o.growth});
  std::string s = "<h2>Against the baseline</h2>\n<p class=\"note\">" +
                  std::to_string(findings.size()) + " regressions against <code>" +
                  esc(o.baseline_name) + "</code> (error grown past x" + format_number(o.growth) +
                  ", new non-finite values, worse outcomes, changed plans).</p>\n";
  if (findings.empty()) return s;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < r.cases.size(); ++i) index[r.cases[i].id] = i;
  std::vector<std::vector<const DiffFinding*>> per_case;
  for (const DiffFinding& f : findings) {
    if (per_case.empty() || per_case.back().front()->case_id != f.case_id) per_case.emplace_back();
    per_case.back().push_back(&f);
  }
  s += "<table><tr><th class=\"l\">case</th><th>findings</th><th class=\"l\">the largest "
       "growth, and what else changed</th></tr>\n";
  for (const auto& group : per_case) s += regression_row(r, drawn, index, group);
  return s + "</table>\n";
}

std::string cases_block(const RunReport& r, const std::vector<bool>& drawn) {
  std::size_t shown = 0;
  for (bool d : drawn) shown += d;
  std::string s = "<h2>Every case</h2>\n<p class=\"note\">" + std::to_string(shown) + " of " +
                  std::to_string(r.cases.size()) +
                  " cases have a section below (linked); `twinpath report page REPORT --case ID "
                  "--out DIR` draws any other.</p>\n<table><tr><th>#</th><th>outcome</th><th "
                  "class=\"l\">case</th><th class=\"l\">nearest its tolerance</th></tr>\n";
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    const auto m = worst_checkpoint(c);
    s += std::string(passed(c) || c.outcome == Outcome::kUnsupported ? "<tr>"
                                                                     : "<tr class=\"bad\">") +
         "<td>" + std::to_string(i + 1) + "</td><td>" + outcome_name(c.outcome) +
         "</td><td class=\"l\">" + case_link(r, drawn, i) + "</td><td class=\"l\">" +
         (m ? esc(margin_text(*m)) : esc(c.reason)) + "</td></tr>\n";
  }
  return s + "</table>\n";
}

}  // namespace

Expected<std::string> run_page_html(const RunReport& report, const PageOptions& o) {
  TP_ASSIGN_OR_RETURN(const std::vector<bool> drawn, sections(report, o));
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                     esc("twinpath report: " + outcome_counts(report.cases)) + "</title>\n" +
                     kStyle + "</head><body>\n<div id=\"summary\">\n" + header(report) +
                     outcome_block(report, drawn) + regressions_block(report, drawn, o) +
                     worst_cases_block(report, drawn) + cases_block(report, drawn) + "</div>\n";
  for (std::size_t i = 0; i < report.cases.size(); ++i)
    if (drawn[i]) page += case_section_html(report.cases[i], anchor(i));
  return page + "</body></html>\n";
}

Status make_page_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && std::filesystem::is_directory(dir, ec)) return Status();
  return Error("cannot make the page's folder " + dir +
               (ec ? ": " + ec.message() : ": a file of that name is in the way") +
               "; give --page (or --out) a folder you can write");
}

Expected<std::string> write_run_page(const std::string& dir, const RunReport& report,
                                     const PageOptions& options) {
  TP_ASSIGN_OR_RETURN(const std::string html, run_page_html(report, options));
  TP_RETURN_IF_ERROR(make_page_folder(dir));
  const std::string path = (std::filesystem::path(dir) / "report.html").string();
  TP_RETURN_IF_ERROR(write_file_atomically(path, [&](std::ostream& out) -> Status {
    out << html;
    return out ? Status() : Error("writing " + path + " failed (disk full?)");
  }));
  return path;
}

}  // namespace tp
