// The paths `twinpath exec --path` accepts, by name.
#pragma once

#include <string>

#include "harness/pipeline.h"

namespace tp {

struct PathChoice {
  GraphRunner run;
  std::string description;  // "reference (f64)"
};

// reference | reference:fp64 | torch | torch:fp64
Expected<PathChoice> make_path(const std::string& name);

}  // namespace tp
