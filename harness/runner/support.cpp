// The dtype combinations the compiled path is meant to have kernels for, from the design's
// numerics contract and written apart from compiled/policy.cpp: the harness's own opinion, so a
// path that runs what it has no kernels for (field report 3), or refuses what it should run,
// is a failure rather than an agreement with itself.
#include <algorithm>

#include "harness/runner/runs.h"

namespace tp {

bool expected_supported(const Case& c) {
  const auto is = [](DType d, std::initializer_list<DType> dtypes) {
    return std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end();
  };
  const DType w = c.policy.weight, a = c.policy.activation, acc = c.policy.accumulation;
  if (!is(a, {DType::kF32, DType::kF16, DType::kBF16})) return false;  // fp8 is a weight dtype
  if (w == DType::kF64) return false;
  if (!is(acc, {DType::kF32, DType::kF16})) return false;
  if (acc == DType::kF16 && !(w == DType::kF16 && a == DType::kF16))
    return false;                     // only to reproduce field bugs
  if (a == DType::kF32) return true;  // f32 GEMMs read any weight, widened
  return w == a || is(w, {DType::kF8E4M3,
                          DType::kF8E5M2});  // 16-bit GEMMs: same dtype, or fp8 widened exactly
}

}  // namespace tp
