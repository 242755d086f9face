#include "compiled/faults.h"

#include "harness/core/names.h"

namespace tp::compiled {

const std::vector<FaultInfo>& all_faults() {
  static const std::vector<FaultInfo> faults = {
      {Fault::kTileThresholdFromStride, "tile-threshold-from-stride",
       "tiling engages when the latent exceeds tile stride / ratio instead of tile min / ratio "
       "(field report 4)"},
      {Fault::kArenaAlias, "arena-alias",
       "co-resident plans share one arena, so running one overwrites the other's live output "
       "(field report 1)"},
      {Fault::kCacheKeyIgnoresWeights, "cache-key-ignores-weights",
       "the plan cache key leaves out the weights identity, so a plan built for other weights is "
       "reused"},
      {Fault::kGroupNormF16Accum, "groupnorm-f16-accum",
       "GroupNorm accumulates its sums and sums of squares in f16 instead of fp32"},
      {Fault::kSoftmaxNoMax, "softmax-no-max",
       "attention softmax skips the max subtraction and holds exp() in the activation dtype"},
      {Fault::kFp8NoScale, "fp8-no-scale",
       "fp8 weights are cast without a scale (scale 1), flushing small weights and saturating "
       "large ones"},
      {Fault::kUpsampleOffByOne, "upsample-off-by-one",
       "the fused nearest-upsample + conv reads source index (i+1)/2 instead of i/2"},
      {Fault::kCrossAttentionQueryLength, "cross-attention-query-length",
       "cross-attention reads as many keys as there are queries (a self-attention kernel's "
       "assumption), not the context's 77"},
      {Fault::kGegluSwap, "geglu-swap",
       "GEGLU splits its projection the wrong way round: gelu of the value half, gated by the "
       "gate half"},
      {Fault::kTimestepSinCosSwap, "timestep-sin-cos-swap",
       "the timestep sinusoid writes sin where flip_sin_to_cos puts cos, and cos where sin goes"},
      {Fault::kCfgHalvesSwapped, "cfg-halves-swapped",
       "classifier-free guidance reads the conditional half of the batch as the unconditional "
       "one and back (guidance pushes away from the prompt)"},
      {Fault::kPlanLoadFirstModel, "plan-load-first-model",
       "loading a plan file maps every plan to the first model of a shared session, so the "
       "refiner's and the shared VAE's plans are checked against the base UNet (field report 2)"},
      {Fault::kF16StoreTruncate, "f16-store-truncate",
       "group outputs stored in f16 are truncated toward zero instead of rounded to nearest even"},
      {Fault::kBf16StoreTruncate, "bf16-store-truncate",
       "group outputs stored in bf16 keep the high 16 bits of the fp32 value (truncation) "
       "instead of rounding to nearest even"},
      {Fault::kSiluInActivationDtype, "silu-in-activation-dtype",
       "SiLU rounds its input, exp(-x), 1 + exp(-x) and the quotient to the activation dtype "
       "instead of computing in fp32"},
      {Fault::kArenaIntervalShort, "arena-interval-short",
       "buffer liveness intervals end one group before their last read, so the arena may give "
       "a live value's bytes to a later group's output"},
      {Fault::kGroupNormOnePass, "groupnorm-one-pass",
       "GroupNorm takes its statistics in one sequential fp32 pass, var = E[x^2] - E[x]^2, which "
       "cancels when a group's mean is large against its spread"},
      {Fault::kFp8RoundHalfAway, "fp8-round-half-away",
       "fp8 weights round exact ties away from zero instead of to even (seen only where "
       "w / scale lands on a tie: weights=ties)"},
      {Fault::kCastSkipsSubmodule, "cast-skips-submodule",
       "under cast=layerwise the layers the casting skips (a DiT's patch embedding, condition "
       "embedder, proj_out) keep fp8 weights and biases and run with them instead of being "
       "refused, as a sub-model left out of the casting (field report 3)"},
      {Fault::kGroupNormVectorTail, "groupnorm-vector-tail",
       "GroupNorm normalizes channels in vectors of 8 and passes the last C mod 8 channels "
       "through unnormalized (a missing remainder loop): right only where the channel count is "
       "a multiple of 8"},
  };
  return faults;
}

std::string FaultSet::to_string() const {
  std::string s;
  for (const FaultInfo& f : all_faults())
    if (has(f.fault)) s += (s.empty() ? "" : ",") + std::string(f.name);
  return s.empty() ? "none" : s;
}

Expected<FaultSet> parse_faults(std::string_view text) {
  FaultSet set;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view name = text.substr(start, end - start);
    bool found = false;
    for (const FaultInfo& f : all_faults())
      if (name == f.name) {
        set.add(f.fault);
        found = true;
      }
    if (!found) {
      std::string known;
      std::vector<std::string> names;
      for (const FaultInfo& f : all_faults()) {
        known += (known.empty() ? "" : ", ") + std::string(f.name);
        names.emplace_back(f.name);
      }
      return Error("unknown fault '" + std::string(name) + "'; the compiled path knows " + known +
                   did_you_mean(name, names));
    }
    start = end + 1;
  }
  return set;
}

}  // namespace tp::compiled
