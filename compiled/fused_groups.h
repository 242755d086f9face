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
#include <string>
#include <tuple>

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

// The implicit-GEMM convolution a fused conv group runs: x channels-last [n, h, w, c] (after
// the upsample prologue), weights [k][r][s][c], output [n, ho, wo, k], operands in `operand`.
struct ConvProblem {
  DType operand = DType::kF16;
  int64_t n = 0, h = 0, w = 0, c = 0, k = 0, r = 1, s = 1, ho = 0, wo = 0;
  int64_t stride = 1, pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  auto tie() const {
    return std::tie(operand, n, h, w, c, k, r, s, ho, wo, stride, pad_top, pad_left, pad_bottom,
                    pad_right);
  }
  bool operator<(const ConvProblem& o) const { return tie() < o.tie(); }
  std::string describe() const;  // "f16 x [1,128,128,512] w [512,3,3,512] stride 1 pad [1,1,1,1]"
};
// From the shapes (NCHW) of the value the conv (or its prologue) reads and of the conv's output.
ConvProblem conv_problem(const Plan& plan, const ConvEpilogue& m, const Shape& input,
                         const Shape& output, DType operand);

struct NormActivation {
  int norm = -1;  // op index of the GroupNorm
  int silu = -1;  // op index of the SiLU after it, or -1
};
std::optional<NormActivation> match_norm_activation(const Plan& plan, const Group& group);

}  // namespace tp::compiled
