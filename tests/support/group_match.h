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
#include "harness/core/shapes.h"
#include "tests/support/compare.h"

namespace tp::testing {

// The longest sum behind one element of the group's outputs: the longest of its ops'
// (harness/core/shapes.h), from the shapes of the values captured.
inline int64_t group_longest_sum(const Graph& graph, const Weights& weights,
                                 const compiled::Group& g, const std::map<int, Tensor>& values) {
  int64_t k = 1;
  for (int o : g.ops) {
    const Op& op = graph.ops[std::size_t(o)];
    const auto w = weights.find(op.weight);
    k = std::max(k, longest_sum(op, w == weights.end() ? nullptr : &w->second.shape(),
                                [&](int v) -> const Shape* {
                                  auto t = values.find(v);
                                  return t == values.end() ? nullptr : &t->second.shape();
                                }));
  }
  return k;
}

// The contract's absolute rule for a group holding diffusers' timestep sinusoid, in f32 units:
// (20 max|t| + 8) u. The device's expf gives the frequencies within 2 ulp of glibc's, and the
// argument t f carries that error times |t| (docs/tolerances.md); 0 without a sinusoid.
inline double sinusoid_allowance(const Graph& graph, const compiled::Group& g,
                                 const std::map<int, Tensor>& values) {
  double largest = -1;
  for (int o : g.ops) {
    const Op& op = graph.ops[std::size_t(o)];
    if (op.kind != OpKind::kTimestepEmbedding) continue;
    const Tensor t = values.at(op.inputs[0]).to(DType::kF32);
    largest = std::max(largest, 1.0);
    for (int64_t i = 0; i < t.numel(); ++i)
      largest = std::max(largest, double(std::fabs(t.data<float>()[i])));
  }
  return largest < 0 ? 0 : (20 * largest + 8) * dtype_epsilon(DType::kF32) / 2;
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
      // A sinusoid's values have rms 1/sqrt 2: 1.5 times the absolute rule bounds its rel L2.
      const double sinusoid = sinusoid_allowance(*pl.graph, g, values);
      const double bound = 4 * std::sqrt(double(group_longest_sum(*pl.graph, weights, g, values))) *
                           dtype_epsilon(DType::kF32) / 2;
      EXPECT_LE(relative_l2(got.value()[o], want), bound + 1.5 * sinusoid) << where;
      EXPECT_LE(max_abs_difference(got.value()[o], want), 8 * bound * max_abs(want) + sinusoid)
          << where;
    }
  }
}

}  // namespace tp::testing
