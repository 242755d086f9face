#include "harness/runner/case_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "harness/core/memory.h"
#include "harness/core/numbers.h"
#include "harness/models/config_space.h"
#include "harness/models/family.h"

namespace tp {

Expected<int> resolve_jobs(const std::string& jobs, const std::vector<const Case*>& cases,
                           compiled::Device device) {
  if (jobs == "auto") {
    if (device != compiled::Device::kCpu) return 1;
    const std::vector<std::string> builtins = builtin_config_names();
    const bool all_tiny = std::all_of(cases.begin(), cases.end(), [&](const Case* c) {
      const std::string name = c->model.substr(0, c->model.rfind('@'));  // NAME[@SEED]
      // Drawn configs are small by construction (harness/models/config_space.h).
      return is_random_config_name(name) ||
             (name.rfind("tiny-", 0) == 0 &&
              std::find(builtins.begin(), builtins.end(), name) != builtins.end());
    });
    return all_tiny ? std::max(1, omp_get_max_threads()) : 1;
  }
  const int n = parse_number<int>(jobs).value_or(0);
  if (n < 1 || n > 64)
    return Error("--jobs " + excerpt(jobs) +
                 " is not auto or a number of concurrent cases from 1 to 64");
  return n;
}

std::size_t run_cases(const std::vector<const Case*>& cases, const RunOptions& options, int jobs,
                      ModelCache& models, const std::function<void(std::size_t, CaseResult)>& done,
                      const std::atomic<bool>* stop_requested) {
  auto stopping = [&] { return stop_requested && stop_requested->load(); };
  if (jobs <= 1 || cases.size() <= 1) {
    std::size_t i = 0;
    for (; i < cases.size() && !stopping(); ++i) {
      const bool measured = reset_peak_rss();
      CaseResult r = run_case(*cases[i], options, models);
      if (measured) r.peak_rss_bytes = std::max<int64_t>(0, peak_rss_bytes());
      done(i, std::move(r));
    }
    return i;
  }
  struct Slot {
    std::optional<CaseResult> result;
    std::exception_ptr error;
  };
  std::vector<Slot> slots(cases.size());
  std::mutex mutex;
  std::condition_variable finished;
  std::atomic<std::size_t> next{0};  // cases [0, next) started (or past the end)
  std::atomic<bool> stop{false};
  const int threads_each = std::max(1, omp_get_max_threads() / jobs);
  auto worker = [&] {
    omp_set_num_threads(threads_each);  // this thread's own OpenMP team size
    while (!stop && !stopping()) {
      const std::size_t i = next++;
      if (i >= cases.size()) break;
      Slot s;
      try {
        s.result = run_case(*cases[i], options, models);
      } catch (...) {
        s.error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex);
      slots[i] = std::move(s);
      finished.notify_all();
    }
  };
  std::vector<std::thread> workers;
  for (int j = 0; j < jobs; ++j) workers.emplace_back(worker);
  std::exception_ptr error;
  std::size_t reported = 0;
  for (std::size_t i = 0; i < cases.size() && !error; ++i) {
    std::unique_lock<std::mutex> lock(mutex);
    // A signal cannot notify: look again every 50 ms whether case i will ever start.
    while (!slots[i].result && !slots[i].error && !(stopping() && i >= next))
      finished.wait_for(lock, std::chrono::milliseconds(50));
    if (!slots[i].result && !slots[i].error) break;  // stopped before it started
    if (slots[i].error) {
      error = slots[i].error;
      break;
    }
    CaseResult r = std::move(*slots[i].result);
    lock.unlock();
    done(i, std::move(r));
    reported = i + 1;
  }
  stop = true;
  for (std::thread& t : workers) t.join();
  if (error) std::rethrow_exception(error);
  return reported;
}

}  // namespace tp
