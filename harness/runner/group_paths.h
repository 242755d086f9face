// A compiled plan's groups as the tolerance table sees them (harness/runner/tolerance.h): each
// group's op class and value path (dtypes, longest sum, GroupNorm conditioning, timestep
// sinusoid), and every graph's paths for the pipeline output's tolerance.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/runner/runs.h"
#include "harness/runner/tolerance.h"

namespace tp {

// The tolerance class of `grp` (an N-d group as its heaviest op).
OpClass class_of(const compiled::Plan& plan, const compiled::Group& grp);

// Every value's shape in a call of `plan`'s graph whose captured values are `values` (empty
// when its inputs were not captured).
std::vector<Shape> call_shapes(const compiled::Plan& plan, const std::map<int, Tensor>& values);

// Group `grp`'s value path in a call with captured `values` and inferred `shapes`.
ValuePath group_path(const compiled::Plan& plan, const compiled::Group& grp,
                     const std::map<int, Tensor>& values, const std::vector<Shape>& shapes,
                     DType reference, int train_timesteps);

// One graph's groups, for the output's tolerance.
struct GraphPaths {
  std::string graph;
  std::vector<ValuePath> paths;
};

// Every group of the largest plan per graph (tiles share a graph; a base and a refiner UNet do
// not), each with the worst conditioning any call of it met; graphs in the order they were first
// compiled.
std::vector<GraphPaths> output_paths(const PreparedCase& p, const ReferenceRun& ref,
                                     const CompiledRun& run);

// The paths of the graphs `keep` keeps, in one list.
std::vector<ValuePath> paths_of(const std::vector<GraphPaths>& graphs,
                                const std::function<bool(const std::string&)>& keep);

}  // namespace tp
