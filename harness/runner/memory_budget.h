// A case's memory, estimated before anything of its size is allocated, and held to a budget: a
// case that cannot fit is refused with the figure it needs, the budget and what to do, instead
// of growing until the kernel's OOM killer ends the run.
//
// The estimate follows the pipeline's graph calls from their shapes alone: the pipeline's own
// code runs at a small size on an executor that only records each call (graph and input shapes)
// and answers with outputs of the inferred shapes, and the calls are scaled to the case's size;
// each call's values then come from shape inference (harness/core/shapes.h). What a case holds
// (docs/design.md, "Memory budget", gives the measurements behind the factors):
//   - the models' fp32 weights, and the compiled path's prepared copies in the weight dtype;
//   - the reference's captured values of every call (each op output a group reads or stores) and
//     the compiled run's stored group outputs, in their dtypes;
//   - the compiled arena and the reference's live values while an op runs;
//   - the second and third compiled runs of a co-residency or warm= check;
//   - the contract check's fp64 LibTorch run of a group (a conv's patch matrix).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "harness/runner/runs.h"

namespace tp {

struct MemoryEstimate {
  int64_t bytes = 0;  // the whole
  int64_t weights = 0, held = 0, working = 0;
  std::string text() const;  // "3.10 GiB (the process 416.00 MiB, weights 12.00 MiB, ...)"
};

// The estimate for `p` (models and options set; its inputs need not be made yet); `contract`:
// with the contract check's fp64 LibTorch runs.
Expected<MemoryEstimate> estimate_case_memory(const PreparedCase& p, bool contract);

// `twinpath triage --activations`: the model's weights and the second copy rounded as the user's
// stack stores them (fp32); the dump's tensors as read and widened to fp32 where compared; the
// fp32 reference's values of every op of `graph` on `inputs` and its working set.
Expected<MemoryEstimate> estimate_dump_memory(const Graph& graph,
                                              const std::map<std::string, Shape>& inputs,
                                              int64_t dump_elements, int64_t dump_bytes,
                                              const Model& model);

// The CPU budget when none is given: the machine's available memory (MemAvailable) less a
// margin of 10% (at least 256 MiB) for the process's own code, allocator slack and neighbours.
int64_t default_memory_budget();

// The budget a run holds to and where it came from, for the refusal: the first of a case's
// mem= and --mem that is set (non-zero), else default_memory_budget().
struct BudgetChoice {
  int64_t bytes = 0;  // 0: unknown, no budget
  std::string source;
};
BudgetChoice choose_memory_budget(int64_t case_limit, int64_t option_limit);

// "" when `estimate` fits `budget`; else the refusal: what the case needs, the budget, and what
// to do (tiling, a smaller resolution, `--mem` / mem=).
std::string memory_refusal(const PreparedCase& p, const MemoryEstimate& estimate, int64_t budget,
                           const std::string& budget_source);

}  // namespace tp
