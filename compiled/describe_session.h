// A session in words: one line per plan (key, groups, arena, weights, compile time), the tiling
// decisions and the cache counters: what `exec` prints and reports record.
#pragma once

#include <string>

#include "compiled/session.h"

namespace tp::compiled {

std::string describe_session(const Session& session);

}  // namespace tp::compiled
