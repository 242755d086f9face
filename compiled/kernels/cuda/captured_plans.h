// CUDA graphs for a fixed plan (TWINPATH_CUDA_GRAPHS=1, compiled/backend.h): a plan's group loop
// runs directly once (weights uploaded, cuDNN plans built, cuBLAS warmed, all outside any
// capture), is captured into a graph on its second run, and is replayed with one launch from then
// on: no per-kernel launch cost on the host, no host work between groups. A graph holds the
// device addresses it was captured with (the arena, the weights, views of another plan's
// arena), so it is kept per plan and arena, captured again when the input shapes or views
// change, and dropped before its arena is freed. A capture that fails (an operation a graph
// cannot hold) leaves that plan on direct launches, and the backend's notes say why.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiled/executor.h"

namespace tp::compiled::cuda_impl {

class CapturedPlans {
 public:
  CapturedPlans() = default;
  CapturedPlans(const CapturedPlans&) = delete;
  CapturedPlans& operator=(const CapturedPlans&) = delete;
  ~CapturedPlans();

  // The plan's groups, as `run_groups` enqueues them on `stream`: directly, or captured and
  // replayed. `run_groups` must free on the stream everything it allocates before it returns.
  Status run(const Plan& plan, const std::byte* arena, const BoundInputs& bound,
             cudaStream_t stream, const std::function<Status()>& run_groups);
  // Drops the graphs that write `arena` (before it is freed).
  void forget(const std::byte* arena);
  // How many plans replay as graphs and how often, and why a capture failed.
  std::string summary() const;

 private:
  struct Entry {
    std::vector<Shape> shapes;  // what the capture was bound to
    std::vector<std::pair<int, const std::byte*>> views;
    cudaGraphExec_t exec = nullptr;
    int direct_runs = 0;
    int64_t replays = 0;
    std::string failed;  // why the capture failed: this plan runs directly
  };
  static void destroy(Entry& e);
  std::map<std::pair<const Plan*, const std::byte*>, Entry> entries_;
};

}  // namespace tp::compiled::cuda_impl
