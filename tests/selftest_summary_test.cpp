// The selftest's shareable summary (reports/selftest_summary.h): the verdict, the contract's
// totals, and one row per case with its outcome, times and checkpoints; a failing case's reason
// stays inside its table cell.
#include "reports/selftest_summary.h"

#include <gtest/gtest.h>

namespace tp {
namespace {

CaseResult checked_case(const std::string& id, Outcome outcome, int64_t violations) {
  CaseResult c;
  c.id = id;
  c.outcome = outcome;
  c.reference_seconds = 0.25;
  c.compiled_seconds = 1.5;
  CheckpointRecord k;
  k.contract.checked = true;
  k.contract.decided = 10;
  k.contract.violations = violations;
  c.checkpoints = {k, k};
  return c;
}

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(SelftestSummary, ListsEveryCaseWithItsFigures) {
  RunReport r;
  r.cases = {checked_case("vae.decode model=tiny-kl kernels=fused", Outcome::kPassed, 0),
             checked_case("unet.step model=tiny-unet-xl", Outcome::kFailed, 3)};
  r.cases[1].reason = "conv_out: 3 elements | past the contract\nsee the report";
  const std::string s = selftest_summary(r, false, "NVIDIA H100; driver CUDA 13.0, cuDNN 9.1.0");
  EXPECT_NE(s.find("- verdict: FAIL (1 passed, 1 failed)"), std::string::npos) << s;
  EXPECT_NE(s.find("- device: NVIDIA H100; driver CUDA 13.0, cuDNN 9.1.0"), std::string::npos);
  EXPECT_NE(s.find("4 checkpoints checked, 40 elements decided, 0 ambiguous, 6 violations"),
            std::string::npos)
      << s;
  EXPECT_NE(
      s.find("| `vae.decode model=tiny-kl kernels=fused` | PASSED | 0.25 | 1.50 | 2 | 0 |  |"),
      std::string::npos)
      << s;
  EXPECT_NE(s.find("| `unet.step model=tiny-unet-xl` | FAILED | 0.25 | 1.50 | 2 | 6 | conv_out: 3 "
                   "elements   past the contract see the report |"),
            std::string::npos)
      << s;
  EXPECT_EQ(count(s, "\n| `"), 2) << s;
}

}  // namespace
}  // namespace tp
