// diffusers' WanTransformer3DModel (Wan 2.1 text-to-video): its family. Pipelines: wan.step (one
// transformer call).
#pragma once

#include "harness/models/family.h"

namespace tp {

const Family& wan_transformer_3d_family();

}  // namespace tp
