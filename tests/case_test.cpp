// Case lines: canonical ids, seeds from ids, and errors that point at the bad token.
#include <gtest/gtest.h>

#include "cases/case.h"

namespace tp {
namespace {

TEST(CaseLine, CanonicalIdRoundTripsAndOrdersOptions) {
  auto c = parse_case("vae.decode   inject=softmax-no-max w=bf16 a=bf16 res=32x48 model=tiny-taesd keep=decoder.*+encoder.conv_in");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->id(), "vae.decode model=tiny-taesd res=32x48 w=bf16 a=bf16 acc=f32 keep=decoder.*+encoder.conv_in inject=softmax-no-max");
  auto again = parse_case(c->id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), c->id());
  EXPECT_EQ(again->seed(), c->seed());
  EXPECT_EQ(c->policy_text(), "w=bf16,a=bf16,acc=f32");
  EXPECT_EQ(repro_command(*c), "twinpath run --case '" + c->id() + "'");
}

TEST(CaseLine, SeedComesFromTheIdOnly) {
  auto a = parse_case("vae.decode model=tiny-kl res=64x64");
  auto b = parse_case("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32");
  auto c = parse_case("vae.decode model=tiny-kl res=64x68");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->seed(), b->seed());
  EXPECT_NE(a->seed(), c->seed());
}

TEST(CaseLine, ErrorsPointAtTheToken) {
  struct Bad {
    const char* line;
    const char* fragment;
  };
  for (const Bad& b : {Bad{"vae.decod model=tiny-kl", "column 1: 'vae.decod'"},
                       Bad{"vae.decode model=tiny-kl res=64by64", "column 26: 'res=64by64': expected res=HEIGHTxWIDTH"},
                       Bad{"vae.decode w=f17", "column 12: 'w=f17'"},
                       Bad{"vae.decode colour=red", "unknown option"},
                       Bad{"vae.decode boost=decoder.conv_out", "expected boost=LAYER*FACTOR"},
                       Bad{"vae.decode tile=64:48", "tile=MIN:STRIDE needs tiling=on"},
                       Bad{"vae.decode ref=f16", "the reference runs in f32 or f64"},
                       Bad{"", "empty case line"}}) {
    auto c = parse_case(b.line);
    ASSERT_FALSE(c.ok()) << b.line;
    EXPECT_NE(c.error().message().find(b.fragment), std::string::npos) << b.line << " -> " << c.error().message();
  }
}

}  // namespace
}  // namespace tp

#include "cases/suite.h"

namespace tp {
namespace {

TEST(SuiteFile, ListsAndRangesExpandToTheCrossProduct) {
  auto cases = expand_suite(
      "# comment line\n"
      "vae.decode,vae.encode model=tiny-kl res=24:32:4x32 w=f16,bf16 a=f16  # trailing comment\n"
      "\n"
      "vae.decode model=tiny-kl res=24x32 w=f16 a=f16\n",  // already listed: runs once
      "test");
  ASSERT_TRUE(cases.ok()) << cases.error().message();
  ASSERT_EQ(cases->size(), 2u * 3u * 2u);
  EXPECT_EQ((*cases)[0].id(), "vae.decode model=tiny-kl res=24x32 w=f16 a=f16 acc=f32");
  EXPECT_EQ((*cases)[1].id(), "vae.decode model=tiny-kl res=24x32 w=bf16 a=f16 acc=f32");
  EXPECT_EQ((*cases)[2].id(), "vae.decode model=tiny-kl res=28x32 w=f16 a=f16 acc=f32");
  EXPECT_EQ((*cases)[11].id(), "vae.encode model=tiny-kl res=32x32 w=bf16 a=f16 acc=f32");
}

TEST(SuiteFile, ATypoPointsAtFileLineAndColumn) {
  struct Bad {
    const char* text;
    const char* fragment;
  };
  for (const Bad& b : {Bad{"vae.decode model=tiny-kl\nvae.decode res=64x6a4\n", "my.txt:2:12: '6a4' is not a size in pixels"},
                       Bad{"vae.decode w=f16,f17\n", "my.txt:1:12: 'w=f17'"},
                       Bad{"vae.decode,vae.decod\n", "my.txt:1:1: 'vae.decod'"},
                       Bad{"vae.decode res=40:32:4x32\n", "not a range A:B:STEP"},
                       Bad{"vae.decode tile=32:16\n", "my.txt:1: tile=MIN:STRIDE needs tiling=on"},
                       Bad{"vae.decode res=1:99999:1x1:99999:1\n", "more than 100000 cases"},
                       Bad{"vae.decode res=1:999999999:1x8\n", "more than 100000 sizes"}}) {
    auto cases = expand_suite(b.text, "my.txt");
    ASSERT_FALSE(cases.ok()) << b.text;
    EXPECT_NE(cases.error().message().find(b.fragment), std::string::npos) << cases.error().message();
  }
}

TEST(SuiteFile, BuiltInSuitesExpand) {
  for (const std::string& name : builtin_suite_names()) {
    auto cases = load_suite(name);
    ASSERT_TRUE(cases.ok()) << name << ": " << cases.error().message();
    EXPECT_FALSE(cases->empty()) << name;
  }
  EXPECT_GE(load_suite("ci")->size(), 150u);
  auto missing = load_suite("no-such-suite");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("neither a built-in suite (ci, field-reports, nightly)"), std::string::npos)
      << missing.error().message();
}

}  // namespace
}  // namespace tp
