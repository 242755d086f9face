#include "reports/baseline.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "reports/h5_report.h"

namespace tp {
namespace {

constexpr const char* kMagic = "twinpath-baseline 1";

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

Status write_baseline(const std::string& path, const RunReport& report) {
  return write_file_atomically(path, [&](std::ostream& out) {
    out << kMagic << "\n";
    for (const CaseResult& c : report.cases) {
      out << "case\t" << c.id << "\t" << outcome_name(c.outcome) << "\n";
      for (const PlanSummary& p : c.plans)
        out << "plan\t" << p.graph << "\t" << p.groups << "\t" << p.arena_bytes << "\t"
            << p.rounding_points << "\n";
      for (const CheckpointRecord& r : c.checkpoints)
        out << "cp\t" << r.name << "\t" << g3(r.accumulated.rel_l2) << "\t"
            << (r.has_local ? g3(r.local.rel_l2) : "-") << "\t" << r.accumulated.non_finite_new
            << "\n";
    }
    return Status();
  });
}

Expected<RunReport> read_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(path + ": cannot open the baseline; check the path");
  std::string line;
  if (!std::getline(in, line) || line != kMagic)
    return Error(path + ": is not a twinpath baseline (it does not start with '" + kMagic +
                 "'); write one with tools/refresh-baseline.sh");
  RunReport report;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_list(line, '\t');
    auto bad = [&](const std::string& what) {
      return Error(path + ":" + std::to_string(number) + ": " + what +
                   "; write the baseline again with tools/refresh-baseline.sh");
    };
    if (f.empty()) return bad("a line of tabs alone");
    try {
      if (f[0] == "case" && f.size() == 3) {
        CaseResult c;
        c.id = f[1];
        if (!parse_outcome(f[2], c.outcome)) return bad("unknown outcome '" + f[2] + "'");
        report.cases.push_back(std::move(c));
      } else if (report.cases.empty()) {
        return bad("a line before the first case");
      } else if (f[0] == "plan" && f.size() == 5) {
        report.cases.back().plans.push_back(
            {f[1], std::stoll(f[2]), std::stoll(f[3]), std::stoll(f[4])});
      } else if (f[0] == "cp" && f.size() == 5) {
        CheckpointRecord r;
        r.name = f[1];
        r.accumulated.rel_l2 = std::stod(f[2]);
        r.has_local = f[3] != "-";
        if (r.has_local) r.local.rel_l2 = std::stod(f[3]);
        r.accumulated.non_finite_new = std::stoll(f[4]);
        report.cases.back().checkpoints.push_back(std::move(r));
      } else {
        return bad("expected a case, plan or cp line with its fields");
      }
    } catch (const std::exception&) {
      return bad("a number does not parse");
    }
  }
  return report;
}

Expected<RunReport> read_report_or_baseline(const std::string& path) {
  std::ifstream in(path);
  std::string first;
  if (in && std::getline(in, first) && first == kMagic) return read_baseline(path);
  return read_h5_report(path);
}

}  // namespace tp
