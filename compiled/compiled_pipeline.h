// Pipelines (vae.encode / vae.decode / vae.roundtrip) on the compiled path. A roundtrip runs
// the encoder and decoder plans co-resident in one session, the decoder reading the encoder's
// latents in place.
#pragma once

#include "compiled/session.h"
#include "harness/pipeline.h"
#include "harness/tiling.h"

namespace tp::compiled {

// With `encoder_outputs`, an untiled roundtrip also returns the encoder's outputs (read after the
// decoder ran, as a caller holding them would: field report 1), named "encoder.<name>".
Expected<NamedTensors> run_compiled_pipeline(Session& session, const Model& model, Pipeline pipeline, const Tensor& input,
                                             const TilingOptions& tiling = {}, bool encoder_outputs = false);

// One line per plan in the session (key, groups, arena, weights, compile time) and the cache
// counters: what `exec` prints and reports record.
std::string describe_session(const Session& session);

}  // namespace tp::compiled
