// A toy model family, defined entirely inside tests/: what adding a family takes (this folder and
// one register_family line). "ToyConvNet": conv_in, one residual block (GroupNorm, SiLU, conv),
// conv_out; one pipeline, toy.forward, image [1,C,H,W] -> image.
#pragma once

#include "harness/models/family.h"

namespace tp::testing {

const Family& toy_family();

}  // namespace tp::testing
