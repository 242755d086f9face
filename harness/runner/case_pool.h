// Cases run side by side. A case on a built-in tiny model is a few milliseconds of small ops:
// OpenMP's threads cost more than they share there (fork, barrier, waking a thread another job
// preempted), so such cases gain from running concurrently, one thread each, instead. Results
// come back in case order, whatever order they finish in, and equal a one-at-a-time run's.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <vector>

#include "harness/runner/case_runner.h"

namespace tp {

// The concurrent cases `jobs` asks for: "auto" is one per OpenMP thread when every case runs on
// a built-in tiny model (too small to share threads) on the CPU, else 1 (each case gets every
// thread; cases on a GPU share one device and its kernels' streams, so they take turns); a
// number is taken as given (1 to 64). Each job runs with the OpenMP threads divided among them.
Expected<int> resolve_jobs(const std::string& jobs, const std::vector<const Case*>& cases,
                           compiled::Device device);

// Runs `cases` on `jobs` threads sharing `models`, calling `done(i, result)` for i = 0, 1, ... in
// order on the calling thread. An exception thrown by a case (an internal error) is rethrown
// here when its turn comes, after the workers have stopped.
// When `stop` turns true (a signal handler sets it), no further case starts: the cases in
// progress finish and are reported, and run_cases returns how many were (a prefix of `cases`).
std::size_t run_cases(const std::vector<const Case*>& cases, const RunOptions& options, int jobs,
                      ModelCache& models, const std::function<void(std::size_t, CaseResult)>& done,
                      const std::atomic<bool>* stop_requested = nullptr);

}  // namespace tp
