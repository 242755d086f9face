#include "reports/run_files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "harness/core/numbers.h"
#include "reports/h5_report.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// "2026-11-26T18:30:12Z" -> "20261126-183012"; the time now when the header has none.
std::string time_stem(const std::string& utc) {
  std::string stem;
  for (char c : utc.empty() ? utc_now() : utc)
    if (c >= '0' && c <= '9')
      stem += c;
    else if (c == 'T')
      stem += '-';
  return stem;
}

// Gives `pending` its run's name: the first of STEM, STEM-2, ... not taken (link(2) fails on a
// taken name, so two runs that start in the same second never share one).
Expected<std::string> publish(const fs::path& runs, const std::string& stem,
                              const fs::path& pending) {
  for (int n = 1; n < 1000; ++n) {
    const std::string name = stem + (n == 1 ? "" : "-" + std::to_string(n));
    const fs::path target = runs / (name + ".h5");
    if (::link(pending.c_str(), target.c_str()) == 0) {
      ::unlink(pending.c_str());
      return name;
    }
    if (errno != EEXIST) break;
  }
  const std::string why = std::strerror(errno);
  ::unlink(pending.c_str());
  return Error("cannot name the report in " + runs.string() + " (" + why +
               "); give --report PATH, or free the folder");
}

// out/NAME -> runs/TARGET, replacing an older link or file in one rename.
void point_latest(const fs::path& out, const std::string& name, const std::string& target) {
  const fs::path tmp = out / (".latest-" + std::to_string(::getpid()) + "-" + name);
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(fs::path("runs") / target, tmp, ec);
  if (!ec) fs::rename(tmp, out / name, ec);
  if (ec) fs::remove(tmp, ec);
}

// Whether `s` is `n` decimal digits.
bool digits(std::string_view s, std::size_t n) {
  return s.size() == n &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A run's file name, YYYYMMDD-HHMMSS[-K].h5 (K of 1 to 3 digits), as (time, K); else nothing.
std::optional<std::pair<std::string, int>> run_name(std::string_view file) {
  if (file.size() < 18 || file.substr(file.size() - 3) != ".h5") return std::nullopt;
  const std::string_view stem = file.substr(0, file.size() - 3);
  if (!digits(stem.substr(0, 8), 8) || stem[8] != '-' || !digits(stem.substr(9, 6), 6))
    return std::nullopt;
  if (stem.size() == 15) return std::make_pair(std::string(stem), 1);
  const std::string_view count = stem.substr(15);
  if (count.size() < 2 || count.size() > 4 || count[0] != '-' ||
      !digits(count.substr(1), count.size() - 1))
    return std::nullopt;
  return std::make_pair(std::string(stem.substr(0, 15)),
                        parse_number<int>(count.substr(1)).value_or(1));
}

// The runs' names, oldest first: by time, then by the same second's count.
std::vector<std::pair<std::string, int>> stored_runs(const fs::path& runs) {
  std::vector<std::pair<std::string, int>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(runs, ec))
    if (auto name = run_name(entry.path().filename().string())) found.push_back(*name);
  std::sort(found.begin(), found.end());
  return found;
}

void remove_old_runs(const fs::path& runs) {
  const auto found = stored_runs(runs);
  for (std::size_t i = 0; i + kKeptRuns < found.size(); ++i) {
    const auto& [stem, n] = found[i];
    const std::string name = stem + (n == 1 ? "" : "-" + std::to_string(n));
    std::error_code ec;
    fs::remove(runs / (name + ".h5"), ec);
    fs::remove(runs / (name + ".xml"), ec);
  }
}

}  // namespace

Expected<RunFiles> write_run_files(const std::string& out, const RunReport& report, bool junit) {
  const fs::path runs = fs::path(out) / "runs";
  std::error_code ec;
  fs::create_directories(runs, ec);
  if (ec)
    return Error("cannot make the folder " + runs.string() + " for the report (" + ec.message() +
                 "); give --report PATH");
  const fs::path pending = runs / (".pending-" + std::to_string(::getpid()) + ".h5");
  TP_RETURN_IF_ERROR(write_h5_report(pending.string(), report));
  TP_ASSIGN_OR_RETURN(const std::string name, publish(runs, time_stem(report.utc_time), pending));
  RunFiles files{(runs / (name + ".h5")).string(), ""};
  point_latest(out, "latest.h5", name + ".h5");
  if (junit) {
    files.junit = (runs / (name + ".xml")).string();
    TP_RETURN_IF_ERROR(write_junit(files.junit, report));
    point_latest(out, "latest.xml", name + ".xml");
  }
  remove_old_runs(runs);
  return files;
}

}  // namespace tp
