// Every value's shape from a graph's input shapes, computed from the ops alone (no data): how a
// path checks a graph before running it and sizes its buffers. An error names the op and the
// shapes that do not fit, so no path has to find out by failing an assertion mid-run.
#pragma once

#include <functional>
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

// The longest sum behind one output element of `op`: a conv's or linear's fan-in (its weight's
// elements per output channel), an attention's channel or token count (one-head [B,C,H,W]) or
// head dim or key count (multi-head), a GroupNorm's group, a LayerNorm's normalized axes.
// `weight`: the op's weight shape (null when it has none or it is not known); `shape_of(v)`:
// value v's shape (null when not known). 1 where nothing is known.
int64_t longest_sum(const Op& op, const Shape* weight,
                    const std::function<const Shape*(int)>& shape_of);

}  // namespace tp
