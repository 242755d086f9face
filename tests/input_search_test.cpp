// The input search of drawn configs (issue 43, harness/runner/case_runner.h): a case whose
// reference output is constant or non-finite on its normal input takes the first input scale
// whose reference output is neither, or says what it tried; the run summary counts them.
#include <gtest/gtest.h>

#include "harness/models/model.h"
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
  EXPECT_EQ(r.input_search, "input scaled by 4 (input=normal*8)");
  EXPECT_NE(r.reason.find("input search: the reference output was constant or non-finite on the "
                          "case as written, so it ran with its input scaled by 4 (input=normal*8)"),
            std::string::npos)
      << r.reason;
}

// Where no input scale helps, the weight matrices are scaled (weights=*K), on the input as
// written; an image input is never scaled, and weights=ties keeps its weights.
TEST(InputSearch, ScalesTheWeightsAfterTheInput) {
  const Case c = case_of("vae.decode model=random:autoencoder_kl:3 res=32x32 input=image");
  std::vector<std::string> tried;
  const CaseResult r = search_input(c, degenerate(c.id()), [&](const Case& scaled) {
    tried.push_back(scaled.id());
    CaseResult out = degenerate(scaled.id());
    out.degenerate_reference = scaled.weight_scale != 2;
    return out;
  });
  EXPECT_EQ(tried, (std::vector<std::string>{
                       "vae.decode model=random:autoencoder_kl:3 res=32x32 w=f16 a=f16 acc=f32 "
                       "input=image weights=*0.5",
                       "vae.decode model=random:autoencoder_kl:3 res=32x32 w=f16 a=f16 acc=f32 "
                       "input=image weights=*2"}));
  EXPECT_EQ(r.input_search, "weights scaled by 2 (weights=*2)");
  const Case ties = case_of(
      "vae.decode model=random:autoencoder_kl:3 res=32x32 input=image "
      "w=f8e4m3 a=f16 acc=f32 weights=ties");
  bool ran = false;
  const CaseResult kept = search_input(ties, degenerate(ties.id()), [&](const Case& scaled) {
    ran = true;
    return degenerate(scaled.id());
  });
  EXPECT_FALSE(ran);
  EXPECT_TRUE(kept.input_search.empty());
}

// weights=*K multiplies every conv and linear weight matrix, and nothing else: a drawn config's
// reference output under weights=*0.5 differs from the plain one, and the line keeps the option.
TEST(InputSearch, WeightScaleIsACaseOption) {
  const Case c = case_of("vae.decode model=random:autoencoder_kl:3 res=32x32 weights=*0.5");
  EXPECT_EQ(c.weight_scale, 0.5);
  EXPECT_EQ(c.id(),
            "vae.decode model=random:autoencoder_kl:3 res=32x32 w=f16 a=f16 acc=f32 weights=*0.5");
  EXPECT_FALSE(parse_case("vae.decode model=tiny-kl res=32x32 weights=*0").ok());
  EXPECT_FALSE(parse_case("vae.decode model=tiny-kl res=32x32 weights=half").ok());
  Model m = make_model("tiny-kl", 3).value();
  const Model plain = m;
  scale_weight_matrices(m, 0.5);
  for (const auto& [key, t] : m.weights) {
    const Tensor& was = plain.weights.at(key);
    const double factor = t.rank() >= 2 ? 0.5 : 1;
    for (int64_t i = 0; i < t.numel(); i += 97)
      ASSERT_EQ(t.to(DType::kF64).data<double>()[i], factor * was.to(DType::kF64).data<double>()[i])
          << key;
  }
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
  EXPECT_EQ(r.input_search,
            "none of the input scales 1/4, 4, 1/16, 16 and the weight scales 1/2, 2 helped");
  EXPECT_NE(
      r.reason.find("and with the input scales 1/4, 4, 1/16, 16 and the weight scales 1/2, 2"),
      std::string::npos)
      << r.reason;
  CaseResult plain;
  plain.id = "vae.encode model=random:autoencoder_kl:4 res=32x32";
  CaseResult fixed;
  fixed.id = "vae.encode model=tiny-kl res=32x32";
  EXPECT_EQ(input_search_summary({r, plain, fixed}),
            "input search: 1 of 2 drawn cases had a constant or non-finite reference output on "
            "their input (autoencoder_kl 1); 0 took a scaled input or weights, 1 found none");
  EXPECT_EQ(input_search_summary({fixed}), "");
}

}  // namespace
}  // namespace tp
