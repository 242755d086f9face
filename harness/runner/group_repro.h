// Minimal repros: the NaN origin group's inputs (as the compiled run read them) and weights in
// one safetensors file, with the model config, graph, group and policy in its metadata, so
// `twinpath replay FILE` runs that group alone, on any machine, without the user's model.
#pragma once

#include <string>

#include "harness/runner/runs.h"

namespace tp {

Status write_group_repro(const std::string& path, const PreparedCase& p, const CompiledRun& run,
                         const Provenance& origin);

// Runs the repro's group op by op (emulated kernels) and, with device "cuda", on the device
// too; returns the lines to print and whether the group still goes non-finite.
struct ReplayOutcome {
  std::string text;
  bool non_finite = false;
  Provenance origin;
};
Expected<ReplayOutcome> replay_group_repro(const std::string& path, compiled::Device device);

}  // namespace tp
