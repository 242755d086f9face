// The user's model behind the overflow dump fixture (tests/fixtures/activations/kl-overflow-f16,
// made by tools/make-activation-fixtures.sh): kl-small.json, seed 3, one conv scaled so that
// diffusers in fp16 overflows there.
#pragma once

#include <string>

#include "tests/support/command.h"

namespace tp::testing {

inline std::string activation_fixtures() {
  return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/activations/";
}

// Writes the model folder to `out`.
inline CommandResult init_overflow_user_model(const std::string& out) {
  return twinpath("model init --config " + activation_fixtures() +
                  "kl-small.json --seed 3 --scale-layer "
                  "'decoder.up_blocks.0.resnets.0.conv2*300000' --out " +
                  out);
}

}  // namespace tp::testing
