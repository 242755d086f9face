#include "harness/models/option_parsers.h"

#include <cmath>

#include "harness/core/format.h"

namespace tp {

std::function<Expected<std::string>(std::string_view)> whole_number_option(std::string syntax,
                                                                           int64_t lo, int64_t hi) {
  return [syntax = std::move(syntax), lo, hi](std::string_view v) -> Expected<std::string> {
    int64_t n = 0;
    if (!parse_int(v, n) || n < lo || n > hi)
      return Error("expected " + syntax + " with N from " + std::to_string(lo) + " to " +
                   std::to_string(hi));
    return std::to_string(n);
  };
}

std::function<Expected<std::string>(std::string_view)> number_option(
    std::function<bool(double)> valid, std::string expected) {
  return [valid = std::move(valid),
          expected = std::move(expected)](std::string_view v) -> Expected<std::string> {
    double x = 0;
    if (!parse_double(v, x) || !std::isfinite(x) || !valid(x)) return Error(expected);
    return format_double(x);
  };
}

std::function<Expected<std::string>(std::string_view)> model_option() {
  return [](std::string_view v) -> Expected<std::string> { return std::string(v); };
}

}  // namespace tp
