// The paths `twinpath exec --path` accepts, by name.
#pragma once

#include <functional>
#include <string>

#include "harness/core/contract.h"
#include "harness/models/model.h"

namespace tp {

// Options of the compiled path (ignored by the others, which refuse them in exec).
struct CompiledOptions {
  std::string policy = "w=f16,a=f16,acc=f32";
  std::string keep_fp32;  // comma-separated module globs
  std::string cast_skip;  // cast=layerwise: comma-separated globs replacing diffusers' skip list
  std::string load;       // cast=layerwise: the dtype the model was loaded in ("": a=)
  std::string fuse_qkv;   // cast=layerwise: before-cast | after-cast ("": not fused)
  std::string inject;     // comma-separated fault names
  std::string shape_policy = "exact";
  std::string load_plan;        // plan file read before the first run
  std::string save_plan;        // plan file written after the run
  bool validate_plans = false;  // check every plan before it runs (compiled/plan_validator.cpp)
};

struct PathChoice {
  std::function<Expected<NamedTensors>(const Model&, const std::string&, const NamedTensors&)> run;
  std::string description;               // "reference (f64)"
  std::function<std::string()> details;  // printed after a run (plan statistics); may be empty
  // Hands the path a model's weights to free as it prepares its own copy of them, when nothing
  // but the path reads them afterwards (exec). Empty for paths that read them on every call.
  std::function<void(Weights&)> consume;
};

// reference | reference:fp64 | torch | torch:fp64 | compiled:cpu | compiled:cuda
Expected<PathChoice> make_path(const std::string& name, const CompiledOptions& compiled = {},
                               const PipelineOptions& options = {});
bool is_compiled_path(const std::string& name);

// The numerics contract's check (the torch path's contract mode); empty in a build without
// LibTorch.
ContractChecker contract_checker();

}  // namespace tp
