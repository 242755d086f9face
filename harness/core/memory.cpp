#include "harness/core/memory.h"

#include <fstream>
#include <string>

namespace tp {

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      return status >> kib ? kib * 1024 : -1;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

bool reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  return bool(clear << "5" << std::flush);
}

}  // namespace tp
