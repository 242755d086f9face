// The input search of drawn configs (issue 43, harness/runner/case_runner.h): a case whose
// reference output is constant or non-finite on its normal input takes the first input scale
// whose reference output is neither, or says what it tried; the run summary counts them.
#include <gtest/gtest.h>

#include "harness/runner/case_runner.h"
#include "reports/report.h"
#include "tests/support/case_line.h"

namespace tp {
namespace {

using testing::case_of;

CaseResult degenerate(const std::string& id) {
  CaseResult r;
  r.id = id;
  r.outcome = Outcome::kMistrusted;
  r.reason = "the reference output is constant";
  r.degenerate_reference = true;
  return r;
}

TEST(InputSearch, TakesTheFirstScaleWhoseReferenceIsSound) {
  const Case c = case_of("vae.decode model=random:autoencoder_kl:3 res=32x32 input=normal*2");
  std::vector<std::string> tried;
  const CaseResult r = search_input(c, degenerate(c.id()), [&](const Case& scaled) {
    tried.push_back(scaled.input);
    CaseResult out = degenerate(scaled.id());
    out.degenerate_reference = scaled.input != "normal*8";
    out.outcome = Outcome::kPassed;
    out.reason = "every checkpoint within tolerance";
    return out;
  });
  EXPECT_EQ(tried, (std::vector<std::string>{"normal*0.5", "normal*8"}));
  EXPECT_EQ(r.id, c.id()) << "the result stays under the listed case's id";
  EXPECT_EQ(r.outcome, Outcome::kPassed);
  EXPECT_EQ(r.input_search, "scaled by 4 (input=normal*8)");
  EXPECT_NE(r.reason.find("input search: the reference output was constant or non-finite on "
                          "input=normal*2, so the input was scaled by 4"),
            std::string::npos)
      << r.reason;
}

TEST(InputSearch, LeavesOtherInputsAsTheyAre) {
  const Case c = case_of("vae.decode model=random:autoencoder_kl:3 res=32x32 input=image");
  bool ran = false;
  const CaseResult r = search_input(c, degenerate(c.id()), [&](const Case& scaled) {
    ran = true;
    return degenerate(scaled.id());
  });
  EXPECT_FALSE(ran);
  EXPECT_TRUE(r.input_search.empty());
}

// A drawn config whose output layer is zeroed (boost=LAYER*0): constant at every scale, so the
// case stays mistrusted, saying what the search tried, and the run summary counts it.
TEST(InputSearch, SaysWhatItTriedWhereNoScaleHelps) {
  ModelCache models;
  const CaseResult r =
      run_case(case_of("vae.encode model=random:autoencoder_kl:3 res=32x32 w=f16 a=f16 acc=f32 "
                       "boost=encoder.conv_out*0"),
               RunOptions{}, models);
  EXPECT_EQ(r.outcome, Outcome::kMistrusted) << r.reason;
  EXPECT_EQ(r.input_search, "none of the scales 1/4, 4, 1/16, 16 helped");
  EXPECT_NE(r.reason.find("and on it scaled by 1/4, 4, 1/16 and 16"), std::string::npos)
      << r.reason;
  CaseResult plain;
  plain.id = "vae.encode model=random:autoencoder_kl:4 res=32x32";
  CaseResult fixed;
  fixed.id = "vae.encode model=tiny-kl res=32x32";
  EXPECT_EQ(input_search_summary({r, plain, fixed}),
            "input search: 1 of 2 drawn cases had a constant or non-finite reference output on "
            "their input (autoencoder_kl 1); 0 took a scaled input, 1 found none");
  EXPECT_EQ(input_search_summary({fixed}), "");
}

}  // namespace
}  // namespace tp
