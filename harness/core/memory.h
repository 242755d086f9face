// The machine's memory as Linux reports it.
#pragma once

#include <cstdint>

namespace tp {

// MemAvailable from /proc/meminfo in bytes, or -1 where it cannot be read.
int64_t available_memory_bytes();

}  // namespace tp
