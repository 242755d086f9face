// diffusers' UNet2DConditionModel (SD 1.5, SDXL base and refiner): its family. Pipelines:
// unet.step (one denoiser call).
#pragma once

#include "harness/models/family.h"

namespace tp {

const Family& unet_2d_condition_family();

}  // namespace tp
