// The plan validator: a plan's arena, liveness and dtypes checked before it runs, so a planner
// bug is a sentence naming the plan, the group and the buffers, not a silently overwritten value.
#include <algorithm>

#include "compiled/plan.h"

namespace tp::compiled {

Status validate_plan(const Plan& plan) {
  const Graph& g = *plan.graph;
  const int groups = int(plan.groups.size());
  auto name = [&](int v) { return g.value_names[std::size_t(v)]; };
  auto where = [&](int gi) {
    return "plan " + g.name + " " + shape_string(plan.capacity_shape) + ", group " +
           std::to_string(gi) + " (" + plan.groups[std::size_t(gi)].checkpoints[0] + ")";
  };
  auto fail = [](const std::string& what) { return Error(what); };
  // Intervals from the partition itself: written by its group (graph inputs before the first),
  // live through its last reader, inclusive (graph outputs to the end).
  std::map<int, std::pair<int, int>> live;
  for (const auto& [name_, v] : g.inputs)
    if (plan.buffers.count(v)) live[v] = {-1, -1};
  for (int gi = 0; gi < groups; ++gi) {
    const Group& grp = plan.groups[std::size_t(gi)];
    for (int v : grp.inputs) {
      auto it = live.find(v);
      if (it == live.end())
        return fail(where(gi) + " reads " + name(v) + " before any group has written it");
      it->second.second = gi;
    }
    for (int v : grp.outputs) {
      if (!plan.buffers.count(v)) return fail(where(gi) + " writes " + name(v) + " to no buffer");
      if (live.count(v)) return fail(where(gi) + " writes " + name(v) + ", written before");
      live[v] = {gi, gi};
      const Buffer& b = plan.buffers.at(v);
      const bool fp32_output =
          g.fp32_arithmetic && std::any_of(g.outputs.begin(), g.outputs.end(),
                                           [&](const auto& o) { return o.second == v; });
      // An fp32 island (Op::fp32_result) keeps its output in f32.
      const bool island = std::any_of(g.ops.begin(), g.ops.end(), [&](const Op& op) {
        return op.output == v && op.fp32_result;
      });
      const DType want = fp32_output ? plan.policy.base.activation
                         : island    ? DType::kF32
                                     : grp.policy.activation;
      if (b.dtype != want)
        return fail(where(gi) + " stores " + name(v) + " in " + dtype_name(b.dtype) +
                    " where its contract says " + dtype_name(want));
    }
  }
  for (const auto& [name_, v] : g.outputs)
    if (live.count(v)) live[v].second = groups;
  for (const auto& [v, b] : plan.buffers) {
    auto it = live.find(v);
    if (it == live.end()) continue;  // a graph input no group reads
    const auto [first, last] = it->second;
    if (b.first_group != first || b.last_group < last)
      return fail(where(std::max(0, std::min(last, groups - 1))) + ": buffer " + name(v) +
                  " is marked live in groups [" + std::to_string(b.first_group) + ", " +
                  std::to_string(b.last_group) + "] but is written in group " +
                  std::to_string(first) + " and read until group " + std::to_string(last));
    if (b.offset < 0 || b.offset + b.bytes > plan.stats.arena_bytes)
      return fail("plan " + g.name + ": buffer " + name(v) + " [" + std::to_string(b.offset) +
                  ", " + std::to_string(b.offset + b.bytes) + ") lies outside the arena of " +
                  std::to_string(plan.stats.arena_bytes) + " bytes");
  }
  // No two buffers live in one group may share bytes.
  for (auto a = plan.buffers.begin(); a != plan.buffers.end(); ++a)
    for (auto b = std::next(a); b != plan.buffers.end(); ++b) {
      if (!live.count(a->first) || !live.count(b->first)) continue;
      const auto [fa, la] = live.at(a->first);
      const auto [fb, lb] = live.at(b->first);
      const int from = std::max(fa, fb), to = std::min(la, lb);
      if (from > to) continue;
      const Buffer &x = a->second, &y = b->second;
      if (x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes)
        return fail(where(std::max(0, std::min(from, groups - 1))) + ": buffers " + name(a->first) +
                    " and " + name(b->first) + " are both live in groups [" + std::to_string(from) +
                    ", " + std::to_string(to) + "] and share bytes [" +
                    std::to_string(std::max(x.offset, y.offset)) + ", " +
                    std::to_string(std::min(x.offset + x.bytes, y.offset + y.bytes)) + ")");
    }
  return Status();
}

}  // namespace tp::compiled
