// A case line parsed for a test, throwing (the test then fails with the parser's sentence) when
// it does not parse.
#pragma once

#include <stdexcept>
#include <string>

#include "cases/case.h"

namespace tp::testing {

inline Case case_of(const std::string& line) {
  auto c = parse_case(line);
  if (!c.ok()) throw std::runtime_error(c.error().message());
  return *c;
}

}  // namespace tp::testing
