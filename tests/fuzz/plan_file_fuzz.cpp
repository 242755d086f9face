// Fuzz target: plan files (--load-plan) against the built-in tiny-kl model. The input is the
// file's JSON body, wrapped with the format line and its checksum (else almost every input would
// stop at the checksum); an input that starts with "twinpath-plan" is taken as a whole file, so
// the header and checksum checks are fuzzed too.
#include <cstring>
#include <string>

#include "compiled/plan_file.h"
#include "harness/models/model.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

struct Fixture {
  tp::Model model;
  tp::compiled::PlanModel plan_model;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    auto m = tp::make_model("tiny-kl", 0);
    if (!m.ok()) __builtin_trap();
    Fixture x{std::move(*m), {}};
    x.plan_model = {x.model.family().graphs(*x.model.config), &x.model.weights, "tiny-kl"};
    return x;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const Fixture& f = fixture();
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.rfind("twinpath-plan", 0) != 0) text = tp::compiled::plan_file_text(text);
  const std::string path =
      tp::fuzz::input_file(reinterpret_cast<const uint8_t*>(text.data()), text.size(), ".plan");
  tp::compiled::SessionOptions options;  // the policy the seed plans were saved with
  auto policy = tp::compiled::parse_layer_policy("w=f16,a=f16,acc=f32");
  if (!policy.ok()) __builtin_trap();
  options.policy.base = *policy;
  options.validate_plans = true;
  tp::compiled::Session session(options);
  (void)tp::compiled::load_plans(session, f.plan_model, path);
  return 0;
}
