// Two backends on the same plan, group by group: every group of `graph`'s plan runs on the
// emulation over `inputs` (its stored values captured), then alone on `device` fed those stored
// values; each output must agree within a few units in the last place of its storage dtype (the
// kernels differ from the emulation only in summation order). Failures name the group.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "compiled/session.h"
#include "tests/support/compare.h"

namespace tp::testing {

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
      const UlpStats s = compare_ulps(got.value()[o], values.at(g.outputs[o]));
      const std::string where =
          what + " group " + std::to_string(i) + " " + g.label() + " " + g.checkpoints[o];
      EXPECT_EQ(s.mismatched_non_finite, 0) << where;
      EXPECT_LE(s.max, 8.0) << where;
      EXPECT_LE(s.over_one, 0.01) << where;
    }
  }
}

}  // namespace tp::testing
