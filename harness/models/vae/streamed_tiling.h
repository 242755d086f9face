// The compiled path's tiler: diffusers' tiled encode/decode semantics, written apart from the
// reference's plain version (tiling.cpp), so a wrong threshold or blend in either shows up as a
// diff. Tiles stream row by row (only the previous row is kept for blending); each tile runs
// through the executor (the compiled session's plan cache), so activation memory is bounded by
// one tile. Blends compute in fp32 and round once to the activation dtype (AutoencoderTiny
// blends into an fp32 output, as upstream). Each stage's engage decision and tile grid go to
// the executor's record_tiling; it injects tile-threshold-from-stride when the executor does.
#pragma once

#include "harness/models/vae/pipeline.h"

namespace tp {

Expected<NamedTensors> run_streamed_tiled(const Model& model, Pipeline pipeline,
                                          const Tensor& input, GraphExecutor& executor,
                                          const TilingOptions& options);

}  // namespace tp
