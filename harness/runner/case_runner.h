// Runs one case on the reference path and the compiled path (CPU emulation or CUDA), captures
// every checkpoint without changing what runs, compares them, and decides: the harness's core.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cases/case.h"
#include "compiled/backend.h"
#include "compiled/session.h"
#include "harness/core/contract.h"
#include "harness/models/model.h"
#include "reports/result.h"

namespace tp {

enum class DumpPolicy : uint8_t { kNone, kFailing, kAll };

struct RunOptions {
  compiled::Device device = compiled::Device::kCpu;
  // How the CUDA backend runs plans, where a case does not say (kernels=, graphs=).
  CudaChoice cuda;
  DumpPolicy dump = DumpPolicy::kNone;
  bool local_error = true;  // run every group alone on the reference's inputs
  bool search = false;      // precision search when the case fails (triage)
  std::string repro_file;   // where to write the NaN origin group's repro (triage); "" for none
  // The contract check (the torch path's contract mode, harness/core/contract.h) of every
  // captured group; empty: not checked (a build without LibTorch).
  ContractChecker contract;
  // The memory a case may use (--mem), bytes; 0: the machine's available memory less a margin
  // (harness/runner/memory_budget.h). A case's mem= overrides it.
  int64_t memory_budget = 0;
  bool check_memory = true;  // false: prepare a case without the budget (plans only, no run)
};

// Models by built-in name or folder, made or loaded once per process. Built-in models are
// seeded from their name, so every case on `tiny-kl` sees the same weights. Cases running
// concurrently share one cache (a model is read-only once made).
class ModelCache {
 public:
  Expected<std::shared_ptr<const Model>> get(const std::string& name_or_dir);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Model>> models_;
};

// The compiled plans a case runs, compiled (weights prepared, no arena allocated) but not run:
// `twinpath plan show`. Fails with the case's refusal when its policy has no kernels.
Expected<std::unique_ptr<compiled::Session>> plan_case(const Case& c, ModelCache& models);

// Mistakes in what the user typed, before anything runs (harness/runner/case_preflight.cpp): a
// model that is neither built in nor a folder, a pipeline its family does not run, a resolution
// the model has no input for; the first, with how many cases share it.
Status check_cases_before_running(const std::vector<const Case*>& cases, ModelCache& models);

// Never fails: what goes wrong is the result's ERROR (or SKIPPED / UNSUPPORTED) with its reason.
CaseResult run_case(const Case& c, const RunOptions& options, ModelCache& models);

// The input search of issue 43 (NNSmith's): run_case calls it for a drawn config
// (model=random:...) whose reference output was constant or held non-finite values (`first`,
// CaseResult::degenerate_reference): `run` on the case with its input=normal[*SIGMA] scaled by
// each of kInputScales in turn (other inputs, image, stress or files, are left as they are), then
// with the original input and every conv and linear weight matrix scaled by each of
// kWeightScales (weights=*K; not under weights=ties); the first whose reference output is
// neither is the result, under the listed case's id, its repro the changed line and its reason
// saying so (CaseResult::input_search); else `first`, saying what was tried.
constexpr double kInputScales[] = {0.25, 4, 1.0 / 16, 16};
constexpr double kWeightScales[] = {0.5, 2};
CaseResult search_input(const Case& c, CaseResult first,
                        const std::function<CaseResult(const Case&)>& run);

}  // namespace tp
