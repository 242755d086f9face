// Fuzz target: a case line (the --case text and every suite line). An accepted line's id is its
// repro: it must parse back to the same case.
#include <string>

#include "cases/case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  auto c = tp::parse_case(line);
  if (!c.ok()) return 0;
  const std::string id = c->id();
  auto again = tp::parse_case(id);
  if (!again.ok() || again->id() != id) __builtin_trap();
  return 0;
}
