// Deliberate, named bugs the compiled path can run with (`--inject NAME`), off by default.
// Each reproduces a field report or a common kernel bug, so the harness can prove it catches
// them: the default suite must flag every fault and pass with none.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/status.h"

namespace tp::compiled {

enum class Fault : uint8_t {
  kTileThresholdFromStride,  // tiling engages at latent size > stride/ratio instead of min/ratio
                             // (field report 4)
  kArenaAlias,  // co-resident plans share one arena, so one run overwrites another's live output
                // (field report 1)
  kCacheKeyIgnoresWeights,  // the plan cache key leaves out the weights, so another model's plan is
                            // reused
  kGroupNormF16Accum,       // GroupNorm sums and sums of squares accumulate in f16 (overflow, lost
                            // precision)
  kSoftmaxNoMax,  // softmax without max subtraction, exp() held in the activation dtype (overflow
                  // to inf/NaN)
  kFp8NoScale,    // fp8 weights cast without a scale (small weights flush, large ones saturate)
  kUpsampleOffByOne,  // fused nearest-upsample + conv reads source row/column (i+1)/2 instead of
                      // i/2
  kCrossAttentionQueryLength,  // cross-attention reads as many keys as there are queries (a
                               // self-attention kernel's assumption), not the context's length
  kGegluSwap,                  // GEGLU takes gelu of the first half and gates with the second
  kTimestepSinCosSwap,         // the timestep sinusoid writes sin where cos goes and back
  kCfgHalvesSwapped,           // guidance reads the conditional half of the batch as the
                               // unconditional one and back
  kPlanLoadFirstModel,  // a plan file's plans are all loaded against the first model of a session
                        // several models share (field report 2)
  kF16StoreTruncate,   // group outputs stored in f16 truncate (round toward zero), not nearest even
  kBf16StoreTruncate,  // the same for bf16 (a bf16 store that drops the low 16 bits)
  kSiluInActivationDtype,  // SiLU computed with its input, exp, sum and quotient rounded to the
                           // activation dtype instead of in fp32
  kArenaIntervalShort,     // liveness intervals end one group before the last read, so a later
                           // group's output may take the bytes of a value still to be read
  kGroupNormOnePass,       // GroupNorm statistics in one fp32 pass, var = E[x^2] - E[x]^2 (exact
                           // enough around zero, cancels when the mean is large against the spread)
  kFp8RoundHalfAway,       // fp8 weights rounded to nearest with ties away from zero, not to even
  kCastSkipsSubmodule,     // cast=layerwise: the layers the casting skips keep fp8 weights and
                           // run anyway, as a sub-model left out of the casting (field report 3)
  kGroupNormVectorTail,    // GroupNorm normalizes channels in vectors of 8 and passes the last
                           // C mod 8 through unnormalized (a missing remainder loop: a
                           // shape-dependent bug only drawn configs meet, issue 43)
};
constexpr int kFaultCount = 20;

struct FaultInfo {
  Fault fault;
  const char* name;
  const char* description;
};
const std::vector<FaultInfo>& all_faults();

// A set of faults, as a bit mask (part of every plan key).
class FaultSet {
 public:
  bool has(Fault f) const { return (bits_ >> unsigned(f)) & 1u; }
  void add(Fault f) { bits_ |= 1u << unsigned(f); }
  bool empty() const { return bits_ == 0; }
  uint32_t bits() const { return bits_; }
  std::string to_string() const;  // "arena-alias,softmax-no-max" or "none"

 private:
  uint32_t bits_ = 0;
};

// Comma-separated fault names; an unknown name lists the known ones.
Expected<FaultSet> parse_faults(std::string_view text);

}  // namespace tp::compiled
