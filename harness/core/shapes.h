// Every value's shape from a graph's input shapes, computed from the ops alone (no data): how a
// path checks a graph before running it and sizes its buffers. An error names the op and the
// shapes that do not fit, so no path has to find out by failing an assertion mid-run.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/core/graph.h"

namespace tp {

// Per value id; a value nothing computes (an unused input) keeps an empty shape.
Expected<std::vector<Shape>> infer_value_shapes(const Graph& graph,
                                                const std::map<std::string, Shape>& inputs);

// numpy broadcasting of two shapes; an error when they do not broadcast.
Expected<Shape> broadcast_shape(const Shape& a, const Shape& b);
// Row-major strides of `operand` read at each index of `out` (its broadcast shape): 0 along an
// axis where the operand has extent 1 or no axis.
std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& out);
// A reshape's target: one -1 inferred, 0 keeps the input's dim at that position.
Expected<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& dims);

}  // namespace tp
