// Two backends on the same plan, group by group: every group of `graph`'s plan runs on the
// emulation over `inputs` (its stored values captured), then alone on `device` fed those stored
// values; each output must agree within a few units in the last place of its storage dtype (the
// kernels differ from the emulation only in summation order), or, stored in fp32, within the
// summation-order bound of its longest sum. Failures name the group.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "compiled/session.h"
#include "tests/support/compare.h"

namespace tp::testing {

// The longest sum behind one element of the group's outputs: a conv's or linear's fan-in, an
// attention's head dim or key count.
inline int64_t longest_sum(const Graph& graph, const Weights& weights, const compiled::Group& g,
                           const std::map<int, Tensor>& values) {
  int64_t k = 1;
  for (int o : g.ops) {
    const Op& op = graph.ops[std::size_t(o)];
    if (!op.weight.empty())
      if (auto w = weights.find(op.weight); w != weights.end() && w->second.rank() > 1)
        k = std::max(k, w->second.numel() / w->second.shape()[0]);
    if (op.kind != OpKind::kAttention && op.kind != OpKind::kMultiHeadAttention) continue;
    for (int v : op.inputs)
      if (auto t = values.find(v); t != values.end())
        for (int64_t d : t->second.shape()) k = std::max(k, d);
    if (op.kind == OpKind::kAttention)  // [B, C, H, W]: H*W keys
      if (auto t = values.find(op.inputs[1]); t != values.end() && t->second.rank() == 4)
        k = std::max(k, t->second.shape()[2] * t->second.shape()[3]);
  }
  return k;
}

inline void expect_every_group_matches(const Graph& graph, const Weights& weights,
                                       const NamedTensors& inputs, compiled::Session& emulated,
                                       compiled::Session& device, const std::string& what) {
  std::vector<Shape> others;
  for (std::size_t i = 1; i < inputs.size(); ++i) others.push_back(inputs[i].second.shape());
  const Shape input_shape = inputs[0].second.shape();
  auto plan = emulated.plan_for(graph, weights, input_shape, others);
  ASSERT_TRUE(plan.ok()) << what << ": " << plan.error().message();
  std::map<int, Tensor> values;
  auto run = emulated.run(graph, weights, inputs,
                          [&](const compiled::Group& g, const NamedTensors& stored) {
                            for (std::size_t i = 0; i < g.outputs.size(); ++i)
                              values[g.outputs[i]] = stored[i].second;
                          });
  ASSERT_TRUE(run.ok()) << what << ": " << run.error().message();
  for (const auto& [name, v] : graph.inputs)
    if (const Tensor* t = find_tensor(inputs, name)) values[v] = t->to(DType::kF32);
  const compiled::Plan& pl = *plan.value();
  for (int i = 0; i < int(pl.groups.size()); ++i) {
    const compiled::Group& g = pl.groups[std::size_t(i)];
    std::map<int, Tensor> group_inputs;
    for (int v : g.inputs) group_inputs[v] = values.at(v);
    auto got = device.run_group(pl, i, input_shape, group_inputs);
    ASSERT_TRUE(got.ok()) << what << " " << g.checkpoints[0] << ": " << got.error().message();
    for (std::size_t o = 0; o < g.outputs.size(); ++o) {
      const Tensor& want = values.at(g.outputs[o]);
      const UlpStats s = compare_ulps(got.value()[o], want);
      const std::string where =
          what + " group " + std::to_string(i) + " " + g.label() + " " + g.checkpoints[o];
      EXPECT_EQ(s.mismatched_non_finite, 0) << where;
      if (pl.buffers.at(g.outputs[o]).dtype != DType::kF32) {
        EXPECT_LE(s.max, 8.0) << where;
        EXPECT_LE(s.over_one, 0.01) << where;
        continue;
      }
      // fp32 storage rounds no coarser than the sums: two summation orders of K terms differ by
      // about sqrt(K) u of the result's scale (random-sign roundings), not a few ulps.
      const double bound = 4 * std::sqrt(double(longest_sum(*pl.graph, weights, g, values))) *
                           dtype_epsilon(DType::kF32) / 2;
      EXPECT_LE(relative_l2(got.value()[o], want), bound) << where;
      EXPECT_LE(max_abs_difference(got.value()[o], want), 8 * bound * max_abs(want)) << where;
    }
  }
}

}  // namespace tp::testing
