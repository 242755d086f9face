// The dtype combinations the compiled path is meant to have kernels for, from the design's
// numerics contract and written apart from compiled/policy.cpp: the harness's own opinion, so a
// path that runs what it has no kernels for (field report 3), or refuses what it should run,
// is a failure rather than an agreement with itself.
#include "harness/runner/runs.h"

namespace tp {

bool expected_supported(const Case& c) {
  const auto is = [](const std::string& d, std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (d == n) return true;
    return false;
  };
  if (!is(c.activation, {"f32", "f16", "bf16"})) return false;  // fp8 is a weight dtype
  if (!is(c.weight, {"f32", "f16", "bf16", "f8e4m3", "f8e5m2"})) return false;
  if (!is(c.accumulation, {"f32", "f16"})) return false;
  if (c.accumulation == "f16" && !(c.weight == "f16" && c.activation == "f16"))
    return false;                          // only to reproduce field bugs
  if (c.activation == "f32") return true;  // f32 GEMMs read any weight, widened
  return c.weight == c.activation ||
         is(c.weight, {"f8e4m3", "f8e5m2"});  // 16-bit GEMMs: same dtype, or fp8 widened exactly
}

}  // namespace tp
