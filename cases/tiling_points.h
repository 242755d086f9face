// The tiling generator: `res=tiling` in a suite line stands for the resolutions around every
// tiling boundary of the case's model, computed from its config and tile options (the video
// style tile=MIN:STRIDE pair included) rather than written by hand:
//   - the engage threshold (the tile min: KL tiles an input that exceeds it), minus one latent
//     pixel, at it, and plus one latent pixel;
//   - the stride boundaries where the tile count changes (S, S + one latent pixel, 2S, 2S + one);
// each along the height with the width at the threshold, and along the width with the height at
// it, for encode and decode thresholds (a roundtrip takes both). Each generated case checks the
// compiled path's engage decision against the config's rule and reports seam-band and interior
// error apart (harness/run/tiling_check.cpp).
#pragma once

#include <utility>
#include <vector>

#include "cases/case.h"

namespace tp {

// Resolutions (height, width) in pixels, ascending, without repeats.
Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(const Case& c);

}  // namespace tp
