// libFuzzer targets read files through the same path-taking readers users reach: the input is
// written to one file per process (in /dev/shm when there is one), named with the extension the
// reader dispatches on.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace tp::fuzz {

inline std::string input_file(const uint8_t* data, std::size_t size, const std::string& extension) {
  static const std::string dir = std::filesystem::is_directory("/dev/shm")
                                     ? "/dev/shm"
                                     : std::filesystem::temp_directory_path().string();
  const std::string path = dir + "/twinpath-fuzz-" + std::to_string(::getpid()) + extension;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the fuzzer cannot run here at all: say so loudly
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace tp::fuzz
