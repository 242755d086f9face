// `twinpath report show|diff|baseline|merge`.
#include "harness/cli/report_command.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "harness/core/numbers.h"
#include "harness/core/untrusted_json.h"
#include "reports/baseline.h"
#include "reports/h5_report.h"
#include "reports/json_report.h"
#include "reports/margins.h"
#include "reports/report_tools.h"
#include "reports/run_page.h"

namespace tp {
namespace {

// Ends the process with one sentence if it is not disarmed (destroyed) within `seconds`.
class ReadWatchdog {
 public:
  ReadWatchdog(const std::string& path, int seconds)
      : thread_([this, path, seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (done_.wait_for(lock, std::chrono::seconds(seconds), [this] { return finished_; }))
            return;
          const std::string message =
              "twinpath: error: reading " + path + " has not finished in " +
              std::to_string(seconds) +
              " s: libhdf5 loops forever on some damaged files (HDFGroup/hdf5 issue 1707); the "
              "file is likely damaged: restore it, or rerun what wrote it\n";
          (void)!::write(2, message.data(), message.size());
          std::_Exit(2);
        }) {}
  ~ReadWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    done_.notify_one();
    thread_.join();
  }
  ReadWatchdog(const ReadWatchdog&) = delete;
  ReadWatchdog& operator=(const ReadWatchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;  // last: it starts once the members it uses exist
};

// libhdf5 1.10 also crashes on some damaged files (H5HG_read copies past its buffers while
// converting a variable-length string attribute; found by fuzzing, docs/fuzzing.md): while it
// reads, a SIGSEGV or SIGBUS ends the process with one sentence and exit code 2 instead of a
// core dump. The sentence is made before the handlers are installed; the handler only writes it.
class CrashGuard {
 public:
  explicit CrashGuard(const std::string& path) {
    const std::string text =
        "twinpath: error: reading " + path +
        " crashed inside the HDF5 library (libhdf5 1.10 reads past its buffers on some damaged "
        "files); the file is likely damaged: restore it, or rerun what wrote it\n";
    length_ = std::min(text.size(), sizeof message_);
    std::memcpy(message_, text.data(), length_);
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &old_segv_);
    sigaction(SIGBUS, &action, &old_bus_);
  }
  ~CrashGuard() {
    sigaction(SIGSEGV, &old_segv_, nullptr);
    sigaction(SIGBUS, &old_bus_, nullptr);
  }
  CrashGuard(const CrashGuard&) = delete;
  CrashGuard& operator=(const CrashGuard&) = delete;

 private:
  static void on_signal(int) {
    (void)!::write(2, message_, length_);
    std::_Exit(2);
  }
  static inline char message_[4096];
  static inline std::size_t length_ = 0;
  struct sigaction old_segv_ {
  }, old_bus_{};
};

// A damaged variable-length string can claim gigabytes: libhdf5 1.10 allocates and fills them
// (21 GB of resident memory for one 68 KB file the fuzzer made). While it reads, the process's
// address space may grow by at most 2 GiB plus 16 times the file's size, so such an allocation
// fails inside libhdf5 (a read error: "damaged") instead of exhausting the machine. Not under
// AddressSanitizer, whose shadow memory needs address space of its own.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(const std::string& path) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
    return;
#endif
#endif
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const int64_t in_use = address_space_in_use();
    if (ec || in_use <= 0 || getrlimit(RLIMIT_AS, &old_) != 0) return;
    const rlim_t cap = rlim_t(in_use) + (rlim_t(2) << 30) + 16 * rlim_t(size);
    if (old_.rlim_cur != RLIM_INFINITY && old_.rlim_cur <= cap) return;
    rlimit lowered = old_;
    lowered.rlim_cur = cap;
    armed_ = setrlimit(RLIMIT_AS, &lowered) == 0;
  }
  ~AddressSpaceCap() {
    if (armed_) setrlimit(RLIMIT_AS, &old_);
  }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;

 private:
  // VmSize of /proc/self/status in bytes, or 0 where it cannot be read.
  static int64_t address_space_in_use() {
    std::ifstream status("/proc/self/status");
    std::string key;
    int64_t kib = 0;
    while (status >> key) {
      if (key == "VmSize:" && status >> kib) return kib * 1024;
      status.ignore(1 << 20, '\n');
    }
    return 0;
  }
  rlimit old_{};
  bool armed_ = false;
};

// How long reading `path` may take: TWINPATH_REPORT_READ_SECONDS, else 5 s and 1 s per MiB
// (ci's 47.6 MB report reads in 5.4 s here: ten times that), so a damaged 1 MB file that
// libhdf5 loops on is refused within seconds.
int read_seconds(const std::string& path) {
  const char* text = std::getenv("TWINPATH_REPORT_READ_SECONDS");
  const int seconds = text ? parse_number<int>(text).value_or(0) : 0;
  if (seconds > 0) return seconds;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  return 5 + (ec ? 0 : int(std::min<uintmax_t>(bytes >> 20, 1 << 20)));
}

}  // namespace

Expected<RunReport> read_report_file(const std::string& path, bool baseline_too) {
  ReadWatchdog watchdog(path, read_seconds(path));
  CrashGuard guard(path);
  AddressSpaceCap cap(path);
  return baseline_too ? read_report_or_baseline(path) : read_h5_report(path);
}

Expected<int> report_show_command(const std::string& path, bool json, bool layers) {
  TP_ASSIGN_OR_RETURN(RunReport r, read_report_file(path));
  if (json) {
    std::cout << json_text(run_json(r), 2) << "\n";
    return any_failure(r.cases) || r.incomplete ? 1 : 0;
  }
  std::cout << path << ": twinpath " << r.tool_version << " (" << r.git_commit << ") on " << r.host
            << ", " << r.device << ", " << r.utc_time
            << (r.shard.empty() ? "" : ", shard " + r.shard) << "\n  " << r.command_line << "\n";
  for (const CaseResult& c : r.cases) {
    std::cout << case_lines(c);
    if (layers && !c.checkpoints.empty())
      std::cout << "    checkpoints (judged error against tolerance):\n" << margin_table(c);
    else if (const auto worst = worst_checkpoint(c))
      std::cout << "    worst: " << margin_text(*worst) << "\n";
  }
  std::cout << outcome_counts(r.cases) << "\n";
  if (r.incomplete)
    std::cout << "INCOMPLETE: " << r.not_run.size()
              << " cases not run (the run was interrupted); `twinpath run --resume " << path
              << "` runs them\n";
  return any_failure(r.cases) || r.incomplete ? 1 : 0;
}

Expected<int> report_diff_command(const std::string& base_path, const std::string& new_path,
                                  double ratio, bool json) {
  if (!(ratio > 1))
    return Error("--growth must be above 1 (it is the factor by which error may grow)");
  TP_ASSIGN_OR_RETURN(RunReport base, read_report_file(base_path, true));
  TP_ASSIGN_OR_RETURN(RunReport next, read_report_file(new_path, true));
  const std::vector<DiffFinding> findings = diff_reports(base, next, DiffOptions{ratio});
  if (json) {
    std::cout << json_text(diff_json(findings, unmatched_cases(base, next), ratio), 2) << "\n";
    return findings.empty() ? 0 : 1;
  }
  for (const DiffFinding& f : findings)
    std::cout << "GREW        " << f.case_id << (f.checkpoint.empty() ? "" : " @ " + f.checkpoint)
              << "\n    " << f.what << "\n";
  for (const std::string& u : unmatched_cases(base, next)) std::cout << "note: " << u << "\n";
  std::cout << findings.size() << " regressions (error growth past x" << ratio
            << ", new non-finite values, worse outcomes)\n";
  return findings.empty() ? 0 : 1;
}

Expected<int> report_baseline_command(const std::string& report_path, const std::string& out) {
  TP_ASSIGN_OR_RETURN(RunReport report, read_report_file(report_path));
  TP_RETURN_IF_ERROR(write_baseline(out, report));
  std::cout << "baseline of " << report.cases.size() << " cases written to " << out << "\n";
  return 0;
}

Expected<int> report_page_command(const std::string& path, const std::string& out,
                                  const std::string& case_id, bool failing,
                                  const std::string& baseline_path, double growth) {
  if (!case_id.empty() && failing) return Error("give --case or --failing, not both");
  if (!(growth > 1))
    return Error("--growth must be above 1 (it is the factor by which error may grow)");
  TP_ASSIGN_OR_RETURN(const RunReport report, read_report_file(path));
  RunReport baseline;
  PageOptions o{case_id, failing, nullptr, baseline_path, growth};
  if (!baseline_path.empty()) {
    TP_ASSIGN_OR_RETURN(baseline, read_report_file(baseline_path, true));
    o.baseline = &baseline;
  }
  TP_ASSIGN_OR_RETURN(const std::string written, write_run_page(out, report, o));
  std::cout << "page: " << written << "\n";
  return 0;
}

Expected<int> report_merge_command(const std::vector<std::string>& inputs, const std::string& out) {
  std::vector<RunReport> shards;
  for (const std::string& path : inputs) {
    TP_ASSIGN_OR_RETURN(RunReport r, read_report_file(path));
    shards.push_back(std::move(r));
  }
  TP_ASSIGN_OR_RETURN(RunReport merged, merge_reports(shards, inputs));
  TP_RETURN_IF_ERROR(write_h5_report(out, merged));
  std::cout << "merged " << inputs.size() << " reports into " << out << ": "
            << outcome_counts(merged.cases) << "\n";
  return 0;
}

}  // namespace tp
