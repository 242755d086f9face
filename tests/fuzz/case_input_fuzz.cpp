// Fuzz target: a case line through input generation (the seeded input, input=normal*SIGMA,
// the stress inputs, a family's other inputs), as `run` prepares a case before running it.
// Lines on a model other than a built-in tiny one, above 64x64 or above 64x64x9 counting a
// video's frames, are left to case_line_fuzz: their inputs (and the memory estimate walking a
// long video's temporal tiles) take seconds to make, not a fault.
#include <algorithm>
#include <charconv>
#include <string>

#include "cases/case.h"
#include "harness/runner/runs.h"

namespace {

// The case's frames= (1 when absent or unreadable: parse_case leaves a family's options as text).
int64_t frames_of(const tp::Case& c) {
  for (const auto& [key, value] : c.options) {
    int64_t n = 1;
    if (key == "frames" &&
        std::from_chars(value.data(), value.data() + value.size(), n).ec == std::errc())
      return std::max<int64_t>(n, 1);
  }
  return 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  auto c = tp::parse_case(std::string(reinterpret_cast<const char*>(data), size));
  if (!c.ok() || c->model.rfind("tiny-", 0) != 0 || c->height * c->width > 64 * 64 ||
      frames_of(*c) > 64 * 64 * 9 / std::max<int64_t>(1, c->height * c->width))
    return 0;
  static tp::ModelCache models;
  const tp::RunOptions options;  // with the memory check, as `run` prepares it
  tp::Outcome refusal = tp::Outcome::kError;
  (void)tp::prepare_case(*c, options, models, refusal);
  return 0;
}
