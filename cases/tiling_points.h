// The tiling generator: `res=tiling` in a suite line stands for the resolutions around every
// tiling boundary of the case's model, computed by its family from its config and tile options
// (Family::tiling_points; the video style tile=MIN:STRIDE pair included) rather than written by
// hand. Each generated case checks the compiled path's engage decision against the config's rule
// and reports seam-band and interior error apart (harness/runner/tiling_check.cpp).
#pragma once

#include <utility>
#include <vector>

#include "cases/case.h"

namespace tp {

// Resolutions (height, width) in pixels, ascending, without repeats.
Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(const Case& c);

}  // namespace tp
