// A toy model family, defined entirely inside tests/: what adding a family takes (this folder and
// one register_family line). "ToyConvNet": conv_in, one residual block (GroupNorm, SiLU, conv),
// conv_out; pipelines toy.forward (image [1,C,H,W] -> image) and toy.tokens (the image as
// tokens through one transformer block of the N-dimensional ops).
#pragma once

#include "harness/models/family.h"

namespace tp::testing {

const Family& toy_family();

}  // namespace tp::testing
