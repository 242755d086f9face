// A chained pipeline's (a roundtrip's) final output in two parts. The second graph (the
// decoder) reads the first's output (the latents), which the compiled path computed with its
// own rounding; a decoder amplifies a latent error by its gain, which on a causal video VAE
// reaches several times the factor the output rule assumes. So the runner measures, on the
// reference alone, what the compiled latents make of the output (the reference's second
// pipeline on them), and judges the compiled second graph against that (its own error) and the
// whole against the first graph's bound times the measured gain with the second's
// (docs/tolerances.md, "Chained pipelines").
#pragma once

#include "harness/runner/runs.h"

namespace tp {

struct ChainedParts {
  NamedTensors got_alone;     // the compiled second pipeline on the compiled handoff
  NamedTensors want_alone;    // the reference second pipeline on the same handoff
  double handoff_rel_l2 = 0;  // the compiled handoff against the reference's
  Tensor handoff;             // the compiled handoff
};

// The same case running one stage of its chain, `pipeline`, alone on `input` (in a session of
// its own: no warm-up call).
PreparedCase stage_case(const PreparedCase& p, const std::string& pipeline, const Tensor& input);

// The parts of `p`'s chained pipeline. The handoffs come from the runs' stage outputs (an
// untiled run); else (a tiled run gives only its final output) from the first pipeline run
// alone on each path, and the compiled second pipeline then runs alone on its handoff.
Expected<ChainedParts> chained_parts(const PreparedCase& p, const ReferenceRun& ref,
                                     const CompiledRun& run);

// How much the reference's second pipeline amplifies the handoff's error into output `want`:
// rel L2 of `want_alone` against `want`, over the handoff's rel L2 (1 where the handoffs agree).
double chained_gain(const ChainedParts& parts, const Tensor& want_alone, const Tensor& want);

}  // namespace tp
