// A case's outcomes other than a verdict on its error: MISTRUSTED where the reference output
// proves nothing (constant, or non-finite), and refusals and errors with their reasons.
#include <gtest/gtest.h>

#include <string>

#include "harness/runner/case_runner.h"
#include "harness/runner/runs.h"
#include "tests/support/case_line.h"

namespace tp {
namespace {

CaseResult run(const std::string& line) {
  static ModelCache models;
  return run_case(testing::case_of(line), {}, models);
}

TEST(CaseOutcome, ConstantOutputIsMistrusted) {
  const CaseResult r =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 boost=decoder.conv_out*0");
  EXPECT_EQ(r.outcome, Outcome::kMistrusted) << r.reason;
  EXPECT_NE(r.reason.find("constant"), std::string::npos) << r.reason;
  EXPECT_NE(r.repro.find("boost=decoder.conv_out*0"), std::string::npos);
}

// Infinite conv_out weights make every output element non-finite on both paths, at the same
// places: agreeing there is no evidence, so the case is mistrusted, not passed.
TEST(CaseOutcome, NonFiniteReferenceOutputIsMistrusted) {
  const CaseResult r =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 boost=decoder.conv_out*inf");
  EXPECT_EQ(r.outcome, Outcome::kMistrusted) << r.reason;
  EXPECT_NE(r.reason.find("the reference output sample holds 12288 non-finite values of 12288"),
            std::string::npos)
      << r.reason;
}

TEST(CaseOutcome, RefusalsAreOutcomesWithReasons) {
  const CaseResult fp8_act = run("vae.decode model=tiny-kl res=64x64 w=f8e4m3 a=f8e4m3 acc=f32");
  EXPECT_EQ(fp8_act.outcome, Outcome::kUnsupported);
  EXPECT_NE(fp8_act.reason.find("fp8 is a weight dtype"), std::string::npos) << fp8_act.reason;
  const CaseResult mixed = run("vae.decode model=tiny-kl res=64x64 w=bf16 a=f16 acc=f32");
  EXPECT_EQ(mixed.outcome, Outcome::kUnsupported) << mixed.reason;
  const CaseResult all_kept = run("vae.decode model=tiny-kl res=64x64 w=bf16 a=f16 acc=f32 keep=*");
  EXPECT_EQ(all_kept.outcome, Outcome::kPassed) << all_kept.reason;  // every layer in fp32: runs
  const CaseResult missing = run("vae.decode model=/no/such/model res=64x64 w=f16 a=f16 acc=f32");
  EXPECT_EQ(missing.outcome, Outcome::kError);
  EXPECT_NE(missing.reason.find("is neither a built-in model"), std::string::npos)
      << missing.reason;
  const CaseResult odd = run("vae.decode model=tiny-kl res=62x64 w=f16 a=f16 acc=f32");
  EXPECT_EQ(odd.outcome, Outcome::kError);
  EXPECT_NE(odd.reason.find("multiple of 4"), std::string::npos) << odd.reason;
  const CaseResult no_layer =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 boost=decoder.nope*2");
  EXPECT_EQ(no_layer.outcome, Outcome::kError);
  EXPECT_NE(no_layer.reason.find("no layer 'decoder.nope'"), std::string::npos) << no_layer.reason;
  // A keep glob that names no layer (here a ',' where '+' separates globs) keeps nothing.
  const CaseResult typo =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 "
          "keep=decoder.conv_in,decoder.conv_out");
  EXPECT_EQ(typo.outcome, Outcome::kError);
  EXPECT_NE(typo.reason.find("keep=decoder.conv_in,decoder.conv_out matches no layer"),
            std::string::npos)
      << typo.reason;
}

}  // namespace
}  // namespace tp
