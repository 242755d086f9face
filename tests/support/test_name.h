// A parameterized test's name from its parameters: GoogleTest takes letters, digits and
// underscores only, so every other character becomes '_'.
#pragma once

#include <cctype>
#include <string>

namespace tp::testing {

inline std::string test_name(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

}  // namespace tp::testing
