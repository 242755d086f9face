// A session of the compiled path: the plan cache, the weight store its plans share, and the
// arenas plans run in. Plans are keyed by (graph hash, weights identity, input shape, dtype
// policy, faults, device); the cache counts hits, compilations and compile time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiled/backend.h"
#include "compiled/planner.h"
#include "harness/core/executor.h"

namespace tp::compiled {

// exact: one plan per input shape. bucket:N: the image's height and width rounded up to a
// multiple of N pixels (a decoder's latents to N / downscale, rounded up); the plan is sized for
// the bucket and its kernels run on the real extent inside it, so outputs equal exact-shape
// outputs.
struct ShapePolicy {
  int64_t bucket = 0;  // 0 = exact
  std::string to_string() const;
};
Expected<ShapePolicy> parse_shape_policy(std::string_view text);

// Sees every group's stored outputs of every plan the session runs (the harness's capture).
using PlanObserver =
    std::function<void(const Plan& plan, int group, const NamedTensors& checkpoints)>;

struct SessionOptions {
  DTypePolicy policy;
  FaultSet faults;
  ShapePolicy shapes;
  int64_t memory_limit_bytes = 0;  // 0: the machine's available memory
  bool validate_plans = false;     // check every plan before it runs (validate_plan)
};

struct CacheStats {
  int64_t hits = 0;
  int64_t compilations = 0;
  int64_t loaded = 0;  // plans read from a plan file
  double compile_seconds = 0;
  int64_t arena_bytes = 0;       // held now, every plan's arena together
  int64_t peak_arena_bytes = 0;  // the most ever held at once
  int64_t evictions = 0;         // idle plans' arenas released to fit the memory limit
};

class Session : public GraphExecutor {
 public:
  // Plans run on `backend`: the CPU emulation unless given another (make_cuda_backend()).
  explicit Session(SessionOptions options,
                   std::unique_ptr<Backend> backend = make_emulated_backend());
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  const SessionOptions& options() const { return options_; }
  Backend& backend() const { return *backend_; }

  // The plan for `graph` over `weights` at `input_shape`: cached, or compiled now. Compiling
  // allocates nothing; running a plan allocates its arena, refused before allocating when the
  // arena alone exceeds the memory limit. Arenas of idle plans are released (evictions) to make
  // room for a new one within the limit.
  // `other_inputs`: the shapes of the graph's inputs after the first (exact).
  Expected<const Plan*> plan_for(const Graph& graph, const Weights& weights,
                                 const Shape& input_shape,
                                 const std::vector<Shape>& other_inputs = {});

  // Runs a graph; outputs as NCHW tensors in their storage (activation) dtypes.
  Expected<NamedTensors> run(const Graph& graph, const Weights& weights, const NamedTensors& inputs,
                             const GroupObserver& observe);
  Expected<NamedTensors> run(const Graph& graph, const Weights& weights,
                             const NamedTensors& inputs) override {
    return run(graph, weights, inputs, GroupObserver{});
  }
  // Runs `first`, then `second` with its only input read in place from `first`'s output
  // `handoff` (no copy): how encoder and decoder plans run co-resident in a roundtrip.
  // Returns the second graph's outputs, then the first's (read after the second ran).
  Expected<NamedTensors> run_chained(const Graph& first, const Graph& second,
                                     const Weights& weights, const NamedTensors& inputs,
                                     const std::string& handoff) override;

  // Runs group `index` of `plan` alone on given input values (Backend::run_group), in the plan's
  // arena: a layer's local error, or two backends on the same inputs.
  Expected<std::vector<Tensor>> run_group(const Plan& plan, int index, const Shape& input_shape,
                                          const std::map<int, Tensor>& values);

  // Capture for every later run (run, run_chained, pipelines and tiles): copies out only.
  void watch(PlanObserver observer) { watcher_ = std::move(observer); }

  // Adds a plan made elsewhere (loaded from a file) under its key, and prepares its weights.
  void adopt(std::unique_ptr<Plan> plan);
  Status prepare_params(Plan& plan, const Weights& weights) {
    return compiled::prepare_params(plan, weights, store_);
  }

  const CacheStats& stats() const { return stats_; }
  std::vector<const Plan*> plans() const;  // in compilation order
  const WeightStore& weight_store() const { return store_; }
  // The store frees each of `weights`' tensors once prepared (WeightStore::consume).
  void consume(Weights& weights) { store_.consume(weights); }
  uint64_t identity_of(const Weights& weights);
  // The identities identity_of has computed, by weights object.
  const std::map<const Weights*, uint64_t>& identities() const { return identities_; }
  // Tiling decisions (engaged or not, tile grid), for statistics and reports.
  void record_tiling(const TilingDecision& d) override { tiling_.push_back(d); }
  bool streams_tiles() const override { return true; }
  bool injects(std::string_view fault) const override;
  const std::vector<TilingDecision>& tiling() const { return tiling_; }

 private:
  std::string key_for(const Graph& graph, uint64_t identity, const Shape& capacity,
                      const std::vector<Shape>& other_inputs) const;
  Shape capacity_for(const Graph& graph, const Shape& input_shape) const;
  // `plan`'s arena, allocated now if it has none; `keep`'s is never evicted to make room.
  Expected<std::byte*> arena_for(const Plan& plan, const Plan* keep = nullptr);
  Expected<NamedTensors> run_plan(const Plan& plan, const std::vector<PlanInput>& inputs,
                                  const GroupObserver& observe);
  GroupObserver observer_for(const Plan& plan, const GroupObserver& observe) const;

  struct Arena {
    int64_t last_use = 0;        // uses_ when a run last asked for it (eviction order)
    std::byte* bytes = nullptr;  // from backend_
    int64_t size = 0;
  };
  SessionOptions options_;
  std::unique_ptr<Backend> backend_;
  WeightStore store_;
  std::map<std::string, std::unique_ptr<Plan>> cache_;
  std::vector<const Plan*> order_;
  std::map<const Plan*, Arena> arenas_;
  int64_t uses_ = 0;
  Arena shared_arena_;  // every plan's arena under the arena-alias fault
  std::map<const Weights*, uint64_t> identities_;
  CacheStats stats_;
  std::vector<TilingDecision> tiling_;
  PlanObserver watcher_;
};

}  // namespace tp::compiled
