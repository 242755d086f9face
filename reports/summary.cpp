#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "reports/report.h"
#include "reports/svg_plot.h"

namespace tp {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string outcome_counts(const std::vector<CaseResult>& cases) {
  std::map<Outcome, int> n;
  for (const CaseResult& c : cases) ++n[c.outcome];
  std::string s;
  for (Outcome o :
       {Outcome::kMistrusted, Outcome::kSkipped, Outcome::kUnsupported, Outcome::kError})
    if (n[o]) {
      std::string name = outcome_name(o);
      for (char& ch : name) ch = char(std::tolower(ch));
      s += std::to_string(n[o]) + " " + name + ", ";
    }
  return s + std::to_string(n[Outcome::kPassed]) + " passed, " +
         std::to_string(n[Outcome::kFailed]) + " failed";
}

bool any_failure(const std::vector<CaseResult>& cases) {
  for (const CaseResult& c : cases)
    if (c.outcome == Outcome::kFailed || c.outcome == Outcome::kError) return true;
  return false;
}

namespace {

// "weights in W with activations in A REST": W, A and where REST starts; else nothing.
struct DTypePair {
  std::string first, second;
  std::size_t rest = 0;
};
std::optional<DTypePair> dtype_pair(const std::string& why) {
  static const std::string kWeights = "weights in ", kActivations = " with activations in ";
  if (why.rfind(kWeights, 0) != 0) return std::nullopt;
  const std::size_t w_end = why.find(' ', kWeights.size());
  if (w_end == std::string::npos || w_end == kWeights.size() ||
      why.compare(w_end, kActivations.size(), kActivations) != 0)
    return std::nullopt;
  const std::size_t a = w_end + kActivations.size(), a_end = why.find(' ', a);
  if (a_end == std::string::npos || a_end == a) return std::nullopt;
  return DTypePair{why.substr(kWeights.size(), w_end - kWeights.size()), why.substr(a, a_end - a),
                   a_end + 1};
}

}  // namespace

std::string refusal_summary(const std::vector<CaseResult>& cases) {
  // Reasons in order of first appearance; the dtype pair a refusal names is counted apart, so
  // "weights in f16 with activations in bf16 is not a combination ..." groups under its reason.
  struct Reason {
    std::string text;
    int count = 0;
    std::vector<std::pair<std::string, int>> pairs;  // "w=f16,a=bf16" -> cases
  };
  std::vector<Reason> reasons;
  int total = 0;
  for (const CaseResult& c : cases) {
    if (c.outcome != Outcome::kUnsupported) continue;
    std::string why = c.reason;
    const std::size_t colon = why.find(": ");
    if (colon != std::string::npos && why.find(' ') > colon)
      why = why.substr(colon + 2);  // "decoder.conv_in: ..."
    why = why.substr(0, std::min(why.find(';'), why.find(" (")));
    std::string pair;
    if (auto p = dtype_pair(why)) {
      pair = "w=" + p->first + ",a=" + p->second;
      why = why.substr(p->rest);
    }
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const Reason& r) { return r.text == why; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), Reason{why, 0, {}});
    ++it->count;
    if (!pair.empty()) {
      auto p = std::find_if(it->pairs.begin(), it->pairs.end(),
                            [&](const auto& e) { return e.first == pair; });
      if (p == it->pairs.end())
        it->pairs.emplace_back(pair, 1);
      else
        ++p->second;
    }
    ++total;
  }
  if (total == 0) return "";
  std::string s =
      std::to_string(total) + " refused as unsupported (each in the report and JUnit): ";
  for (std::size_t i = 0; i < reasons.size(); ++i) {
    const Reason& r = reasons[i];
    s += (i ? "; " : "") + std::to_string(r.count) + " " + r.text;
    if (r.pairs.empty()) continue;
    std::string pairs;
    for (const auto& [pair, n] : r.pairs)
      pairs += (pairs.empty() ? "" : ", ") + pair + " x" + std::to_string(n);
    s += r.pairs.size() <= 4 ? " (" + pairs + ")"
                             : " (" + std::to_string(r.pairs.size()) + " dtype pairs)";
  }
  return s;
}

std::string case_lines(const CaseResult& r) {
  char head[64];
  std::snprintf(head, sizeof head, "%-11s ", outcome_name(r.outcome));
  std::string s = head + r.id;
  if (r.outcome == Outcome::kPassed) {
    char t[64];
    std::snprintf(t, sizeof t, "  (%.2f s ref, %.2f s compiled)", r.reference_seconds,
                  r.compiled_seconds);
    return s + t + "\n";
  }
  s += "\n    " + r.reason + "\n";
  if (r.provenance.found && r.outcome == Outcome::kFailed) {
    const Provenance& p = r.provenance;
    s +=
        "    origin: " + (p.step.empty() ? "" : p.step + ", ") + p.layer + " (" + p.op +
        "), cause " + p.cause + ", element " + format_index(p.index) +
        (p.stored_layer.empty() ? "" : ", stored at " + p.stored_layer + " (" + p.stored_op + ")") +
        "\n";
  }
  if (r.searched) {
    const std::string keep = join_list(r.keep_fp32, ',');
    // A list no run has verified (triage of a user's dump) says what it is, not "passes".
    s += r.keep_fp32.empty() ? "    precision search: " + r.search_note + "\n"
         : r.search_runs == 0
             ? "    keep in fp32: '" + keep + "' (" + r.search_note + ")\n"
             : "    passes with: --keep-fp32 '" + keep + "' (" + r.search_note + ")\n";
  }
  return s + "    repro: " + r.repro + "\n";
}

Status write_junit(const std::string& path, const RunReport& report) {
  std::map<Outcome, int> n;
  double total = 0;
  for (const CaseResult& c : report.cases) {
    ++n[c.outcome];
    total += c.reference_seconds + c.compiled_seconds;
  }
  return write_file_atomically(path, [&](std::ostream& out) {
    char buf[256];
    out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    std::snprintf(
        buf, sizeof buf,
        "<testsuites tests=\"%zu\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
        report.cases.size(), n[Outcome::kFailed], n[Outcome::kError],
        n[Outcome::kSkipped] + n[Outcome::kUnsupported] + n[Outcome::kMistrusted], total);
    out << buf;
    out << "  <testsuite name=\"twinpath\" tests=\"" << report.cases.size() << "\" timestamp=\""
        << markup_escape(report.utc_time) << "\" hostname=\"" << markup_escape(report.host)
        << "\">\n";
    for (const CaseResult& c : report.cases) {
      std::snprintf(buf, sizeof buf, "%.3f", c.reference_seconds + c.compiled_seconds);
      out << "    <testcase classname=\"twinpath." << markup_escape(c.device) << "\" name=\""
          << markup_escape(c.id) << "\" time=\"" << buf << "\">\n";
      const std::string msg = markup_escape(std::string(outcome_name(c.outcome)) + ": " + c.reason);
      const std::string body = markup_escape(case_lines(c));
      switch (c.outcome) {
        case Outcome::kPassed:
          break;
        case Outcome::kFailed:
          out << "      <failure message=\"" << msg << "\">" << body << "</failure>\n";
          break;
        case Outcome::kError:
          out << "      <error message=\"" << msg << "\">" << body << "</error>\n";
          break;
        // A mistrusted case proved nothing either way: not a pass, not a breach (as in the exit
        // code).
        case Outcome::kMistrusted:
        case Outcome::kSkipped:
        case Outcome::kUnsupported:
          out << "      <skipped message=\"" << msg << "\"/>\n";
          break;
      }
      out << "    </testcase>\n";
    }
    out << "  </testsuite>\n</testsuites>\n";
    return Status();
  });
}

std::string input_search_summary(const std::vector<CaseResult>& cases) {
  static const std::string kDrawn = "model=random:";
  int drawn = 0, scaled = 0, unhelped = 0;
  std::map<std::string, int> per_family;
  for (const CaseResult& c : cases) {
    const std::size_t at = c.id.find(kDrawn);
    if (at == std::string::npos) continue;
    ++drawn;
    if (c.input_search.empty()) continue;
    const std::size_t from = at + kDrawn.size();
    ++per_family[c.id.substr(from, c.id.find(':', from) - from)];
    (c.input_search.rfind("none", 0) == 0 ? unhelped : scaled) += 1;
  }
  if (drawn == 0) return "";
  std::string text = "input search: " + std::to_string(scaled + unhelped) + " of " +
                     std::to_string(drawn) +
                     " drawn cases had a constant or non-finite reference "
                     "output on their input";
  if (scaled + unhelped == 0) return text;
  std::string families;
  for (const auto& [family, n] : per_family)
    families += (families.empty() ? "" : ", ") + family + " " + std::to_string(n);
  return text + " (" + families + "); " + std::to_string(scaled) +
         " took a scaled input or weights, " + std::to_string(unhelped) + " found none";
}

}  // namespace tp
