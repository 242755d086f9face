#include "harness/models/option_parsers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tp {

std::function<Expected<std::string>(std::string_view)> whole_number_option(std::string syntax,
                                                                           int64_t lo, int64_t hi) {
  return [syntax = std::move(syntax), lo, hi](std::string_view v) -> Expected<std::string> {
    const bool digits = !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    const int64_t n = digits ? std::strtoll(std::string(v).c_str(), nullptr, 10) : -1;
    if (!digits || n < lo || n > hi)
      return Error("expected " + syntax + " with N from " + std::to_string(lo) + " to " +
                   std::to_string(hi));
    return std::to_string(n);
  };
}

std::function<Expected<std::string>(std::string_view)> number_option(
    std::function<bool(double)> valid, std::string expected) {
  return [valid = std::move(valid),
          expected = std::move(expected)](std::string_view v) -> Expected<std::string> {
    const std::string s(v);
    char* end = nullptr;
    const double x = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x) || !valid(x))
      return Error(expected);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", x);
    return std::string(buf);
  };
}

std::function<Expected<std::string>(std::string_view)> model_option() {
  return [](std::string_view v) -> Expected<std::string> { return std::string(v); };
}

}  // namespace tp
