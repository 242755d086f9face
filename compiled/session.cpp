#include "compiled/session.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "harness/core/format.h"
#include "harness/core/numbers.h"

namespace tp::compiled {

std::string ShapePolicy::to_string() const {
  return bucket == 0 ? "exact" : "bucket:" + std::to_string(bucket);
}

Expected<ShapePolicy> parse_shape_policy(std::string_view text) {
  if (text == "exact") return ShapePolicy{};
  if (text.substr(0, 7) == "bucket:") {
    const int64_t v = parse_number<int64_t>(text.substr(7)).value_or(0);
    if (v > 0 && v <= 4096) return ShapePolicy{v};
  }
  return Error(
      "shape policy '" + excerpt(text) +
      "' is unknown; use exact or bucket:N with N a positive size in pixels (e.g. bucket:64)");
}

bool Session::injects(std::string_view fault) const {
  for (const FaultInfo& f : all_faults())
    if (f.name == fault) return options_.faults.has(f.fault);
  return false;
}

Session::Session(SessionOptions options, std::unique_ptr<Backend> backend)
    : options_(std::move(options)), backend_(std::move(backend)) {}

Session::~Session() {
  for (auto& [plan, a] : arenas_) backend_->release(a.bytes);
  backend_->release(shared_arena_.bytes);
}

uint64_t Session::identity_of(const Weights& weights) {
  auto it = identities_.find(&weights);
  if (it != identities_.end()) return it->second;
  return identities_[&weights] = weights_identity(weights);
}

Shape Session::capacity_for(const Graph& graph, const Shape& s) const {
  if (options_.shapes.bucket == 0 || s.size() != 4 || graph.has_nd_ops()) return s;
  const int64_t n = (options_.shapes.bucket + graph.input_pixel - 1) / graph.input_pixel;
  return {s[0], s[1], (s[2] + n - 1) / n * n, (s[3] + n - 1) / n * n};
}

std::string Session::key_for(const Graph& graph, uint64_t identity, const Shape& capacity,
                             const std::vector<Shape>& other_inputs) const {
  char hashes[64];
  std::snprintf(hashes, sizeof hashes, "graph=%016llx",
                static_cast<unsigned long long>(graph.hash()));
  std::string key = hashes;
  if (!options_.faults.has(Fault::kCacheKeyIgnoresWeights)) {
    std::snprintf(hashes, sizeof hashes, " weights=%016llx",
                  static_cast<unsigned long long>(identity));
    key += hashes;
  }
  key += " shape=" + shape_string(capacity);
  for (const Shape& other : other_inputs) key += "+" + shape_string(other);
  return key + " policy=" + options_.policy.to_string() + " faults=" + options_.faults.to_string() +
         " device=" + backend_->device();
}

Expected<const Plan*> Session::plan_for(const Graph& graph, const Weights& weights,
                                        const Shape& input_shape,
                                        const std::vector<Shape>& other_inputs) {
  const uint64_t identity = identity_of(weights);
  const Shape capacity = capacity_for(graph, input_shape);
  const std::string key = key_for(graph, identity, capacity, other_inputs);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++stats_.hits;
    return it->second.get();
  }
  PlanRequest request{&graph,          &weights,        identity,           capacity,
                      options_.policy, options_.faults, backend_->device(), other_inputs};
  TP_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, compile_plan(request, store_));
  if (options_.validate_plans)
    if (Status valid = validate_plan(*plan); !valid.ok())
      return Error(std::string(kInvalidPlan) + ": " + valid.error().message() +
                   "; report it with the case line");
  plan->key = key;
  ++stats_.compilations;
  stats_.compile_seconds += plan->stats.compile_seconds;
  const Plan* p = plan.get();
  cache_[key] = std::move(plan);
  order_.push_back(p);
  return p;
}

void Session::adopt(std::unique_ptr<Plan> plan) {
  ++stats_.loaded;
  const Plan* p = plan.get();
  order_.push_back(p);
  cache_[plan->key] = std::move(plan);
}

std::vector<const Plan*> Session::plans() const { return order_; }

Expected<std::byte*> Session::arena_for(const Plan& plan, const Plan* keep) {
  const bool shared = options_.faults.has(Fault::kArenaAlias);
  Arena& a = shared ? shared_arena_ : arenas_[&plan];
  const int64_t need = plan.stats.arena_bytes;
  a.last_use = ++uses_;
  if (a.size >= need && a.bytes) return a.bytes;
  // An explicit limit bounds every arena held together; without one, what the device has free
  // now (which already excludes the arenas held).
  const bool explicit_limit = options_.memory_limit_bytes > 0;
  const int64_t limit = explicit_limit ? options_.memory_limit_bytes : backend_->available_bytes();
  if (need > limit)
    return Error(plan.graph->name + ": needs " + format_bytes(need) +
                 " of activation memory at input " + shape_string(plan.capacity_shape) + " but " +
                 format_bytes(limit) + " is " +
                 (explicit_limit ? "the memory limit" : "available") + " on " + backend_->device() +
                 "; use a smaller resolution or batch, or tiling (tiling=on)");
  stats_.arena_bytes -= a.size;
  backend_->release(a.bytes);
  a = Arena{a.last_use};
  if (explicit_limit) {
    // Least recently used first: the same choice on every run (not the plans' heap addresses).
    std::vector<Arena*> idle;
    for (auto& [other, held] : arenas_)
      if (other != &plan && other != keep && held.bytes) idle.push_back(&held);
    std::sort(idle.begin(), idle.end(),
              [](const Arena* x, const Arena* y) { return x->last_use < y->last_use; });
    for (Arena* held : idle) {
      if (stats_.arena_bytes + need <= limit) break;
      backend_->release(held->bytes);
      stats_.arena_bytes -= held->size;
      *held = Arena{held->last_use};
      ++stats_.evictions;
    }
  }
  if (stats_.arena_bytes + need > limit)
    return Error(plan.graph->name + ": needs " + format_bytes(need) +
                 " of activation memory at input " + shape_string(plan.capacity_shape) +
                 " beside " + format_bytes(stats_.arena_bytes) +
                 " held by plans running with it, over the " + format_bytes(limit) + " limit on " +
                 backend_->device() + "; use a smaller resolution, or tiling (tiling=on)");
  TP_ASSIGN_OR_RETURN(a.bytes, backend_->allocate(need));
  a.size = need;
  stats_.arena_bytes += need;
  stats_.peak_arena_bytes = std::max(stats_.peak_arena_bytes, stats_.arena_bytes);
  return a.bytes;
}

GroupObserver Session::observer_for(const Plan& plan, const GroupObserver& observe) const {
  if (!watcher_) return observe;
  return [this, &plan, observe](const Group& group, const NamedTensors& checkpoints) {
    if (observe) observe(group, checkpoints);
    watcher_(plan, int(&group - plan.groups.data()), checkpoints);
  };
}

Expected<NamedTensors> Session::run_plan(const Plan& plan, const std::vector<PlanInput>& inputs,
                                         const GroupObserver& observe) {
  TP_ASSIGN_OR_RETURN(std::byte * arena, arena_for(plan));
  TP_RETURN_IF_ERROR(backend_->execute(plan, arena, inputs, observer_for(plan, observe)));
  const Shape in = inputs[0].tensor ? inputs[0].tensor->shape() : inputs[0].view.shape;
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes, plan_shapes(plan, in));
  NamedTensors out;
  for (const auto& [name, v] : plan.graph->outputs) {
    TP_ASSIGN_OR_RETURN(Tensor t, backend_->read(plan, arena, v, shapes[std::size_t(v)]));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

Expected<std::vector<Tensor>> Session::run_group(const Plan& plan, int index,
                                                 const Shape& input_shape,
                                                 const std::map<int, Tensor>& values) {
  bool fits = input_shape.size() == plan.capacity_shape.size();
  for (std::size_t i = 0; fits && i < input_shape.size(); ++i)
    fits = input_shape[i] <= plan.capacity_shape[i];
  if (!fits)
    return Error("group " + std::to_string(index) + " of " + plan.graph->name +
                 " was planned for " + shape_string(plan.capacity_shape) + " and cannot run on " +
                 shape_string(input_shape) + " (a call of another shape)");
  TP_ASSIGN_OR_RETURN(std::byte * arena, arena_for(plan));
  return backend_->run_group(plan, arena, index, input_shape, values);
}

Expected<NamedTensors> Session::run(const Graph& graph, const Weights& weights,
                                    const NamedTensors& inputs, const GroupObserver& observe) {
  // The graph's inputs in its order: the first sizes the plan, the others are exact shapes.
  std::vector<PlanInput> bound;
  std::vector<Shape> others;
  for (const auto& [name, id] : graph.inputs) {
    const Tensor* t = find_tensor(inputs, name);
    if (!t) return Error(graph.name + " takes an input named " + name + ", which was not given");
    bound.push_back(PlanInput{name, t, {}});
    if (bound.size() > 1) others.push_back(t->shape());
  }
  TP_ASSIGN_OR_RETURN(const Plan* plan, plan_for(graph, weights, bound[0].tensor->shape(), others));
  return run_plan(*plan, bound, observe);
}

Expected<NamedTensors> Session::run_chained(const Graph& first, const Graph& second,
                                            const Weights& weights, const NamedTensors& inputs,
                                            const std::string& handoff) {
  int v = -1;
  for (const auto& [name, id] : first.outputs)
    if (name == handoff) v = id;
  TP_CHECK(v >= 0, first.name + " has no output " + handoff);
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes, infer_shapes(first, inputs[0].second.shape()));
  const Shape& mid = shapes[std::size_t(v)];
  TP_ASSIGN_OR_RETURN(const Plan* a, plan_for(first, weights, inputs[0].second.shape()));
  TP_ASSIGN_OR_RETURN(const Plan* b, plan_for(second, weights, mid));
  // Both arenas exist before either plan runs, so the view below stays valid (under
  // arena-alias they are one allocation, grown to the larger plan first).
  TP_RETURN_IF_ERROR(arena_for(*b, a));
  TP_ASSIGN_OR_RETURN(std::byte * arena_a, arena_for(*a, b));
  TP_RETURN_IF_ERROR(backend_->execute(*a, arena_a,
                                       {PlanInput{first.inputs[0].first, &inputs[0].second, {}}},
                                       observer_for(*a, {})));
  const BufferView view = view_value(*a, arena_a, v, mid);
  TP_ASSIGN_OR_RETURN(NamedTensors out,
                      run_plan(*b, {PlanInput{second.inputs[0].first, nullptr, view}}, {}));
  // The first plan's outputs are read after the second ran, as a caller holding them would.
  for (const auto& [name, id] : first.outputs) {
    TP_ASSIGN_OR_RETURN(Tensor t, backend_->read(*a, arena_a, id, shapes[std::size_t(id)]));
    out.emplace_back(name, std::move(t));
  }
  return out;
}

}  // namespace tp::compiled
