// Small text formatting shared by verdicts, provenance and the CLI.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tp {

// A value as people read it in a sentence: 6 significant digits ("65504", "1.23e+05", "nan").
inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// An element index: "[0,3,5,7]".
inline std::string format_index(const std::vector<int64_t>& index) {
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? "," : "") + std::to_string(index[i]);
  return s + "]";
}

}  // namespace tp
