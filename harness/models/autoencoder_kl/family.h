// diffusers' AutoencoderKL (SD 1.5, SDXL VAEs): its family (graphs in kl_graph.cpp).
#pragma once

#include "harness/models/family.h"

namespace tp {

const Family& autoencoder_kl_family();

}  // namespace tp
