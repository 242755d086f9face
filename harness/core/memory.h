// The machine's memory as Linux reports it.
#pragma once

#include <cstdint>

namespace tp {

// MemAvailable from /proc/meminfo in bytes, or -1 where it cannot be read.
int64_t available_memory_bytes();

// The process's peak resident set (VmHWM from /proc/self/status) in bytes, or -1.
int64_t peak_rss_bytes();

// Starts the peak resident set again from the current one (Linux 4.0's clear_refs "5"), so that
// peak_rss_bytes() after a piece of work is that work's peak; false where it cannot.
bool reset_peak_rss();

}  // namespace tp
