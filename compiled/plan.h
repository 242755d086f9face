// A plan: the compiled path's shape-specialized executable form of one graph under one dtype
// policy. Ops are partitioned into fused groups; inside a group everything is fp32 and only
// the group's outputs are rounded (to their activation dtype) and stored, channels-last
// (NHWC), in one arena whose buffers are reused once their values are dead.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiled/faults.h"
#include "compiled/policy.h"
#include "compiled/prepared_weights.h"
#include "harness/core/contract.h"
#include "harness/core/graph.h"

namespace tp::compiled {

enum class GroupKind : uint8_t {
  kConv,         // conv + bias [+ residual add] [+ activation] [+ gaussian tail], optional upsample
                 // prologue
  kGroupNorm,    // GroupNorm [+ SiLU]
  kAttention,    // [LayerNorm or token views +] to_q/to_k/to_v + softmax(q k^T * scale) v + to_out
                 // [+ token views back] [+ residual add]: an image attention or a multi-head one
  kElementwise,  // a standalone pointwise op (and its pointwise successors)
  kUpsample,     // a standalone nearest upsample (its consumer is not a conv)
  kTensor,       // N-dimensional ops (graph.h, kConv onwards): one op, or GEGLU, or a LayerNorm
                 // with its projections [+ epilogue: GELU, reshape, broadcast binary]
};
const char* group_kind_name(GroupKind kind);

struct Group {
  GroupKind kind;
  std::vector<int> ops;                  // op indices, in the order they run inside the group
  std::vector<int> inputs;               // values read from outside the group
  std::vector<int> outputs;              // values the group stores (read later or graph outputs)
  std::vector<std::string> checkpoints;  // per output: its diffusers module path, else its op name
  bool upsample_prologue = false;        // the conv reads its input through a nearest 2x upsample
  LayerPolicy policy;
  std::string label() const;  // "conv+add+relu" etc., from the ops
};

// Where a value lives: in the arena, in its group's activation dtype; NHWC, or row-major in its
// logical shape in a plan of N-dimensional ops (Plan::row_major).
struct Buffer {
  int value = -1;
  DType dtype = DType::kF16;
  Shape shape;         // NCHW at the plan's capacity shape
  int64_t offset = 0;  // bytes into the arena
  int64_t bytes = 0;
  int first_group = 0;  // -1 for graph inputs
  int last_group = 0;   // groups.size() for graph outputs
};

struct PlanStats {
  double compile_seconds = 0;
  int64_t arena_bytes = 0;     // peak, after liveness-based reuse
  int64_t unshared_bytes = 0;  // what the buffers would take without reuse
  int64_t weight_bytes = 0;    // the plan's weights in their storage dtypes
  int groups = 0;
  int ops = 0;
};

// A plan's value shapes by input shape, as plan_shapes last inferred them (a session runs a plan
// at a few shapes, once per call and group run). Each entry holds its graph, so an entry found
// is for the same graph and other inputs even in a copy of the plan whose graph changed.
struct ShapeMemo {
  struct Entry {
    std::shared_ptr<const Graph> graph;
    std::vector<Shape> other_inputs;
    Shape input;
    std::vector<Shape> shapes;
  };
  std::mutex mutex;
  std::vector<Entry> entries;  // the latest last, at most kEntries
  static constexpr std::size_t kEntries = 8;
};

struct Plan {
  std::string key;  // the cache key (graph, weights, shape, policy, faults, device)
  std::shared_ptr<const Graph> graph;
  uint64_t graph_hash = 0;
  uint64_t weights_identity = 0;
  Shape capacity_shape;  // input shape the arena is sized for (>= actual shapes under bucketing)
  // The graph's other inputs (cross-attention context, masks ...), at exactly these shapes.
  std::vector<Shape> other_inputs;
  // A graph with N-dimensional ops: every buffer row-major in its logical shape (the [B,C,H,W]
  // kinds read and write through channels-last copies); else every buffer NHWC.
  bool row_major = false;
  DTypePolicy policy;
  FaultSet faults;
  std::string device;             // the backend it runs on: "cpu-emulated" or "cuda"
  std::vector<Group> groups;      // in execution order
  std::map<int, Buffer> buffers;  // by value id
  std::map<std::string, std::shared_ptr<const PreparedParam>> params;  // by parameter key
  PlanStats stats;
  std::shared_ptr<ShapeMemo> shape_memo = std::make_shared<ShapeMemo>();
};

// Value shapes (logical, NCHW for images) for the graph's first input at `input_shape` and its
// other inputs at `other_inputs` (in graph.inputs order); empty for values never computed.
Expected<std::vector<Shape>> infer_shapes(const Graph& graph, const Shape& input_shape,
                                          const std::vector<Shape>& other_inputs = {});
// The same for a plan's graph, its other inputs at the plan's shapes.
Expected<std::vector<Shape>> plan_shapes(const Plan& plan, const Shape& input_shape);

// Checks a plan before it runs (compiled/plan_validator.cpp): every read after its write, liveness
// intervals (inclusive) covering every read, no two buffers live in one group sharing bytes,
// every buffer inside the arena, and each stored value's dtype as the contract says. A violation
// names the plan, the group and the buffers.
Status validate_plan(const Plan& plan);
// What a session's error says after a validation failure (SessionOptions::validate_plans), and
// whether an error is one.
constexpr const char* kInvalidPlan = "the planner made an invalid plan";
inline bool is_invalid_plan(const Error& e) { return e.message().rfind(kInvalidPlan, 0) == 0; }

// Group `index`'s numerics contract (compiled/contract.cpp), and every group's as rows.
GroupContract group_contract(const Plan& plan, int index);
std::vector<ContractRow> plan_contract_rows(const Plan& plan);

}  // namespace tp::compiled
