// The rotary position tables of a DiT over a token grid (diffusers' WanRotaryPosEmbed with
// get_1d_rotary_pos_embed): every path rotates by the same float32 values, so the tables are
// made once here.
#pragma once

#include <cstdint>
#include <vector>

namespace tp {

// cos and sin of the angle of each (token, pair): tokens frame-major over frames x height x
// width, pairs the head dim's adjacent pairs, the frame axis' first, then height's, then
// width's (`axis_dims` their shares of the head dim, each even). Pair k of an axis of share d
// at position p turns by p * (1 / theta^(2k/d)), computed in float64 and rounded to float32.
struct RotaryTables {
  int64_t tokens = 0, pairs = 0;
  std::vector<float> cos, sin;  // [tokens][pairs]
};
RotaryTables rotary_tables(const std::vector<int64_t>& axis_dims, double theta, int64_t frames,
                           int64_t height, int64_t width);

}  // namespace tp
