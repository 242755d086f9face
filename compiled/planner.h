// The planner: lowers a graph, for one input shape and dtype policy, to a Plan.
#pragma once

#include <memory>

#include "compiled/plan.h"

namespace tp::compiled {

struct PlanRequest {
  const Graph* graph = nullptr;
  const Weights* weights = nullptr;
  uint64_t weights_identity = 0;
  Shape capacity_shape;  // the first input's shape the arena is sized for
  DTypePolicy policy;
  FaultSet faults;
  std::string device = "cpu-emulated";  // the backend the plan will run on (Backend::device())
  std::vector<Shape> other_inputs;      // the other inputs' shapes (exact)
};

// Groups the ops, assigns each group its layer policy (refusing unsupported combinations by
// layer name), lays out buffers channels-last in one arena with liveness-based reuse, and
// prepares the weights through `store`.
Expected<std::unique_ptr<Plan>> compile_plan(const PlanRequest& request, WeightStore& store);

// Checks every matrix layer's policy, then prepares the plan's weights through `store` (also
// used for plans loaded from files).
Status prepare_params(Plan& plan, const Weights& weights, WeightStore& store);

// The fused groups alone (exposed for tests): op indices per group, in execution order.
std::vector<Group> partition_into_groups(const Graph& graph);

// Buffer offsets for values with [first_group, last_group] lifetimes; returns the arena size.
int64_t assign_offsets(std::map<int, Buffer>& buffers);

}  // namespace tp::compiled
