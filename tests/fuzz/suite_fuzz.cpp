// Fuzz target: suite files (comments, comma lists, ranges, res=tiling, the case limit).
#include <string_view>

#include "cases/suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  (void)tp::expand_suite(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.txt");
  return 0;
}
