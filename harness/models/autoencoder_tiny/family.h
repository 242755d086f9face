// diffusers' AutoencoderTiny (TAESD): its family (graphs in tiny_graph.cpp).
#pragma once

#include "harness/models/family.h"

namespace tp {

const Family& autoencoder_tiny_family();

}  // namespace tp
