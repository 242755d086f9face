#include "harness/models/option_parsers.h"

#include <cmath>
#include <cstdio>

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

PipelineOption steps_option(int default_steps) {
  return {"steps",
          "steps",
          "steps=N",
          std::to_string(default_steps),
          "scheduler steps, 1 to 1000",
          whole_number_option("steps=N", 1, 1000)};
}

PipelineOption guidance_option(double default_scale) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", default_scale);
  return {"guidance",
          "guidance-scale",
          "guidance=SCALE",
          text,
          "classifier-free guidance scale, off at <= 1 as in diffusers",
          number_option([](double g) { return g >= 0; },
                        "expected guidance=SCALE, a number >= 0 (<= 1 turns guidance off)")};
}

}  // namespace tp
