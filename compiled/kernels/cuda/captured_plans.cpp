#include "compiled/kernels/cuda/captured_plans.h"

#include "harness/core/graph.h"

namespace tp::compiled::cuda_impl {

CapturedPlans::~CapturedPlans() {
  for (auto& [key, e] : entries_) destroy(e);
}

void CapturedPlans::destroy(Entry& e) {
  if (e.exec) cudaGraphExecDestroy(e.exec);
  e.exec = nullptr;
}

void CapturedPlans::forget(const std::byte* arena) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->first.second != arena) {
      ++it;
      continue;
    }
    destroy(it->second);
    it = entries_.erase(it);
  }
}

Status CapturedPlans::run(const Plan& plan, const std::byte* arena, const BoundInputs& bound,
                          cudaStream_t stream, const std::function<Status()>& run_groups) {
  Entry& e = entries_[{&plan, arena}];
  std::vector<std::pair<int, const std::byte*>> views;
  for (const auto& [v, view] : bound.views) views.emplace_back(v, view.data);
  if (e.shapes != bound.shapes || e.views != views) {
    destroy(e);
    e = Entry{};
    e.shapes = bound.shapes;
    e.views = std::move(views);
  }
  // The first run uploads the weights (pageable copies, which a capture cannot hold) and plans.
  if (!e.failed.empty() || (!e.exec && e.direct_runs++ == 0)) return run_groups();
  if (!e.exec) {
    // Thread-local: another thread's unsafe CUDA call does not invalidate this capture.
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      e.failed = "cudaStreamBeginCapture failed";
      return run_groups();
    }
    const Status ran = run_groups();
    cudaGraph_t graph = nullptr;
    cudaError_t made = cudaStreamEndCapture(stream, &graph);
    if (ran.ok() && made == cudaSuccess) made = cudaGraphInstantiate(&e.exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (!ran.ok() || made != cudaSuccess) {
      cudaGetLastError();
      e.exec = nullptr;
      e.failed = ran.ok() ? std::string(cudaGetErrorName(made)) : ran.error().message();
      return run_groups();  // nothing captured ran: run it now
    }
  }
  if (const cudaError_t launched = cudaGraphLaunch(e.exec, stream); launched != cudaSuccess) {
    cudaGetLastError();
    return Error("launching " + plan.graph->name + "'s CUDA graph: " + cudaGetErrorName(launched) +
                 "; run with graphs=off (--cuda-graphs off) to launch it directly");
  }
  ++e.replays;
  return Status();
}

std::string CapturedPlans::summary() const {
  int captured = 0;
  int64_t replays = 0;
  std::string failed;
  for (const auto& [key, e] : entries_) {
    if (e.exec) ++captured;
    replays += e.replays;
    if (!e.failed.empty()) failed += "; " + key.first->graph->name + " direct: " + e.failed;
  }
  return "CUDA graphs: " + std::to_string(captured) + " plans captured, " +
         std::to_string(replays) + " replays" + failed;
}

}  // namespace tp::compiled::cuda_impl
