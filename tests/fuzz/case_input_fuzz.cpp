// Fuzz target: a case line through input generation (the seeded input, input=normal*SIGMA,
// the stress inputs, a family's other inputs), as `run` prepares a case before running it.
// Lines on a model other than a built-in tiny one, or above 64x64, are left to case_line_fuzz:
// their inputs take seconds to make, not a fault.
#include <string>

#include "cases/case.h"
#include "harness/runner/runs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  auto c = tp::parse_case(std::string(reinterpret_cast<const char*>(data), size));
  if (!c.ok() || c->model.rfind("tiny-", 0) != 0 || c->height * c->width > 64 * 64) return 0;
  static tp::ModelCache models;
  const tp::RunOptions options;  // with the memory check, as `run` prepares it
  tp::Outcome refusal = tp::Outcome::kError;
  (void)tp::prepare_case(*c, options, models, refusal);
  return 0;
}
