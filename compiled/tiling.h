// The compiled path's tiling runtime: diffusers' tiled encode/decode semantics, written apart
// from the reference's plain version (harness/tiling.cpp). Tiles stream row by row (only the
// previous row is kept for blending); each tile runs through the session's plan cache, so
// activation memory is bounded by one tile. Blends compute in fp32 and round once to the
// activation dtype (AutoencoderTiny blends into an fp32 output, as upstream). The engage
// decision and tile grid are recorded in the session's statistics.
#pragma once

#include "compiled/session.h"
#include "harness/pipeline.h"
#include "harness/tiling.h"

namespace tp::compiled {

Expected<NamedTensors> run_tiled(Session& session, const Model& model, Pipeline pipeline, const Tensor& input,
                                 const TilingOptions& options);

}  // namespace tp::compiled
