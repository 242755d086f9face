// Which plan groups a device backend may run as fused kernels (the CUDA backend's `fused`
// kernel set): groups whose fused form has the same rounding points as the emulation, so the
// numerics contract of `twinpath plan show` holds unchanged. Inside either form every value is
// fp32 and the group's one output is rounded once; fusing only removes the fp32 round trips
// through memory between the ops.
//  - ConvEpilogue: [nearest 2x upsample prologue] conv2d [+ residual add], one output. The
//    conv accumulates in fp32 (any order, as the contract says); scale (fp8), bias and the
//    residual are applied in that order in fp32, without FMA, and the sum is rounded once.
//  - NormActivation: GroupNorm [+ SiLU], one output: the statistics as before (double, two
//    passes), then normalize, affine and SiLU in fp32 and the one rounding, in one pass.
// A plan with a fault in one of these ops (the fault tests) and a row-major plan match
// nothing: they keep the per-op kernels.
#pragma once

#include <optional>

#include "compiled/plan.h"

namespace tp::compiled {

struct ConvEpilogue {
  int upsample = -1;  // op index of the upsample prologue, or -1
  int conv = -1;      // op index of the conv2d
  int add = -1;       // op index of the residual add, or -1
  int input = -1;     // the value the conv (or its upsample prologue) reads
  int residual = -1;  // the add's other operand, or -1
};
std::optional<ConvEpilogue> match_conv_epilogue(const Plan& plan, const Group& group);

struct NormActivation {
  int norm = -1;  // op index of the GroupNorm
  int silu = -1;  // op index of the SiLU after it, or -1
};
std::optional<NormActivation> match_norm_activation(const Plan& plan, const Group& group);

}  // namespace tp::compiled
