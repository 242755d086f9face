#include "reports/baseline.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "harness/core/numbers.h"
#include "reports/gzip_text.h"
#include "reports/h5_report.h"

namespace tp {
namespace {

constexpr const char* kMagic = "twinpath-baseline 1";
constexpr std::size_t kMaxFileBytes = std::size_t{256} << 20;  // far above ci's ~6 MB of text
constexpr const char* kRefresh = "write the baseline again with tools/refresh-baseline.sh";

std::string g3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string baseline_text(const RunReport& report) {
  std::ostringstream out;
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
  return out.str();
}

// The file's bytes, at most kMaxFileBytes of them.
Expected<std::string> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot open the baseline; check the path");
  std::string bytes;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > kMaxFileBytes)
      return Error(path + ": is larger than 256 MiB, too large for a baseline; " + kRefresh);
  }
  return bytes;
}

// The baseline's text: the file itself, or what it inflates to when gzipped.
Expected<std::string> baseline_file_text(const std::string& path) {
  auto bytes = file_bytes(path);
  if (!bytes.ok() || !looks_gzipped(*bytes)) return bytes;
  auto text = gunzip_text(*bytes, kMaxFileBytes);
  if (!text.ok()) return Error(path + ": " + text.error().message() + "; " + kRefresh);
  return text;
}

Status parse_line(const std::vector<std::string>& f, RunReport& report) {
  if (f.empty()) return Error("a line of tabs alone");
  if (f[0] == "case" && f.size() == 3) {
    CaseResult c;
    c.id = f[1];
    if (!parse_outcome(f[2], c.outcome)) return Error("unknown outcome '" + excerpt(f[2]) + "'");
    report.cases.push_back(std::move(c));
    return Status();
  }
  if (report.cases.empty()) return Error("a line before the first case");
  const auto whole = [](const std::string& t) { return parse_number<int64_t>(t); };
  const auto real = [](const std::string& t) { return parse_number<double>(t); };
  if (f[0] == "plan" && f.size() == 5) {
    const auto groups = whole(f[2]), arena = whole(f[3]), points = whole(f[4]);
    if (!groups || !arena || !points) return Error("a plan's number does not parse");
    report.cases.back().plans.push_back({f[1], *groups, *arena, *points});
    return Status();
  }
  if (f[0] == "cp" && f.size() == 5) {
    CheckpointRecord r;
    r.name = f[1];
    r.has_local = f[3] != "-";
    const auto accumulated = real(f[2]), local = r.has_local ? real(f[3]) : 0.0;
    const auto fresh = whole(f[4]);
    if (!accumulated || !local || !fresh) return Error("a checkpoint's number does not parse");
    r.accumulated.rel_l2 = *accumulated;
    r.local.rel_l2 = *local;
    r.accumulated.non_finite_new = *fresh;
    report.cases.back().checkpoints.push_back(std::move(r));
    return Status();
  }
  return Error("expected a case, plan or cp line with its fields");
}

}  // namespace

Status write_baseline(const std::string& path, const RunReport& report) {
  const std::string text = baseline_text(report);
  return write_file_atomically(path, [&](std::ostream& out) {
    out << (ends_with(path, ".gz") ? gzip_text(text) : text);
    return Status();
  });
}

Expected<RunReport> read_baseline(const std::string& path) {
  auto text = baseline_file_text(path);
  if (!text.ok()) return text.error();
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic)
    return Error(path + ": is not a twinpath baseline (it does not start with '" + kMagic +
                 "'); write one with tools/refresh-baseline.sh");
  RunReport report;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const Status parsed = parse_line(split_list(line, '\t'), report);
    if (!parsed.ok())
      return Error(path + ":" + std::to_string(number) + ": " + parsed.error().message() + "; " +
                   kRefresh);
  }
  return report;
}

Expected<RunReport> read_report_or_baseline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string first(2, '\0');
  if (in && in.read(first.data(), 2) && looks_gzipped(first)) return read_baseline(path);
  in.clear();
  in.seekg(0);
  if (in && std::getline(in, first) && first == kMagic) return read_baseline(path);
  return read_h5_report(path);
}

}  // namespace tp
