// Inputs that stress the numerics where random normals do not: a large per-channel DC offset
// (norms whose mean is large against their spread), heavy tails (stores and products meeting
// rare large values), long constant runs (identical tokens: softmax ties), and magnitudes near
// f16's range (stores, squares and residual sums near overflow). Applied to a case's generated
// primary input (`input=dc*K`, `input=heavy`, `input=runs`, `input=range`).
#pragma once

#include <string>

#include "harness/core/status.h"
#include "harness/core/tensor.h"

namespace tp {

// Whether `input` names a stress distribution (else normal, image or a file).
bool is_stress_input(const std::string& input);
// The case's input text checked: "" when it is well-formed, else what is wrong.
std::string check_stress_input(const std::string& input);
// The largest magnitude `input=range` gives: 1/4 of f16's largest finite value.
constexpr double kRangeStressMax = 65504.0 / 4;

// `x` (f32, [B, C, ...], seeded normal values) reshaped into the distribution `input` names.
Tensor stress_input(const Tensor& x, const std::string& input, uint64_t seed);

}  // namespace tp
