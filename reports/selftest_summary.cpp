#include "reports/selftest_summary.h"

#include <cstdio>
#include <sstream>

namespace tp {
namespace {

struct ContractTotals {
  int64_t checkpoints = 0, decided = 0, ambiguous = 0, violations = 0;
  void add(const CheckpointRecord& k) {
    if (!k.contract.checked) return;
    ++checkpoints;
    decided += k.contract.decided;
    ambiguous += k.contract.ambiguous;
    violations += k.contract.violations;
  }
};

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", s);
  return text;
}

// A table cell holds no '|' and no line break.
std::string cell(std::string text) {
  for (char& c : text)
    if (c == '|' || c == '\n') c = ' ';
  return text;
}

}  // namespace

std::string selftest_summary(const RunReport& r, bool passed, const std::string& device) {
  ContractTotals all;
  for (const CaseResult& c : r.cases)
    for (const CheckpointRecord& k : c.checkpoints) all.add(k);
  std::ostringstream os;
  os << "# twinpath selftest\n\n"
     << "- verdict: " << (passed ? "PASS" : "FAIL") << " (" << outcome_counts(r.cases) << ")\n"
     << "- device: " << device << "\n"
     << "- twinpath " << r.tool_version << ", commit " << r.git_commit << "; host " << r.host
     << "; " << r.utc_time << "\n"
     << "- command: `" << r.command_line << "`\n"
     << "- numerics contract: " << all.checkpoints << " checkpoints checked, " << all.decided
     << " elements decided, " << all.ambiguous << " ambiguous, " << all.violations
     << " violations\n\n"
     << "| case | outcome | reference s | CUDA s | checkpoints | contract violations | why |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (const CaseResult& c : r.cases) {
    ContractTotals t;
    for (const CheckpointRecord& k : c.checkpoints) t.add(k);
    os << "| `" << cell(c.id) << "` | " << outcome_name(c.outcome) << " | "
       << seconds(c.reference_seconds) << " | " << seconds(c.compiled_seconds) << " | "
       << c.checkpoints.size() << " | " << t.violations << " | "
       << (c.outcome == Outcome::kPassed ? "" : cell(c.reason)) << " |\n";
  }
  return os.str();
}

}  // namespace tp
