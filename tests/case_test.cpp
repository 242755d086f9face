// Case lines: canonical ids, seeds from ids, and errors that point at the bad token.
#include "cases/case.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cases/stress_inputs.h"
#include "harness/core/rng.h"

namespace tp {
namespace {

TEST(CaseLine, CanonicalIdRoundTripsAndOrdersOptions) {
  auto c = parse_case(
      "vae.decode   inject=softmax-no-max w=bf16 a=bf16 res=32x48 model=tiny-taesd "
      "keep=decoder.*+encoder.conv_in");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->id(),
            "vae.decode model=tiny-taesd res=32x48 w=bf16 a=bf16 acc=f32 "
            "keep=decoder.*+encoder.conv_in inject=softmax-no-max");
  auto again = parse_case(c->id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), c->id());
  EXPECT_EQ(again->seed(), c->seed());
  EXPECT_EQ(c->policy_text(), "w=bf16,a=bf16,acc=f32");
  EXPECT_EQ(repro_command(*c), "twinpath run --case '" + c->id() + "'");
}

TEST(CaseLine, StreamCasesNameTheirResolutionsInOrder) {
  auto c =
      parse_case("vae.decode model=tiny-kl mem=2MiB shapes=bucket:32 stream=64x64+64x80+48x48");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->id(),
            "vae.decode model=tiny-kl stream=64x64+64x80+48x48 w=f16 a=f16 acc=f32 "
            "shapes=bucket:32 mem=2MiB");
  ASSERT_EQ(c->stream.size(), 3u);
  EXPECT_EQ(c->stream[1], (std::pair<int64_t, int64_t>{64, 80}));
  EXPECT_EQ(c->memory_limit, int64_t(2) << 20);
  auto again = parse_case(c->id());
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->id(), c->id());
  // Any case takes a memory budget (harness/runner/memory_budget.h), not only a stream.
  auto budget = parse_case("vae.decode res=64x64 mem=8GiB");
  ASSERT_TRUE(budget.ok()) << budget.error().message();
  EXPECT_EQ(budget->memory_limit, int64_t(8) << 30);
  EXPECT_NE(budget->id().find(" mem=8GiB"), std::string::npos) << budget->id();
}

TEST(CaseLine, SeedComesFromTheIdOnly) {
  auto a = parse_case("vae.decode model=tiny-kl res=64x64");
  auto b = parse_case("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32");
  auto c = parse_case("vae.decode model=tiny-kl res=64x68");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->seed(), b->seed());
  EXPECT_NE(a->seed(), c->seed());
}

// The CUDA backend's choices are written in the line (a device failure reproduces from it) but
// leave the seed alone: the same inputs on every kernel set.
TEST(CaseLine, KernelsAndGraphsAreInTheIdButNotInTheSeed) {
  auto plain = parse_case("vae.decode model=tiny-kl res=64x64");
  auto chosen = parse_case("vae.decode graphs=on kernels=fused model=tiny-kl res=64x64");
  ASSERT_TRUE(plain.ok() && chosen.ok()) << chosen.error().message();
  EXPECT_EQ(chosen->id(),
            "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 kernels=fused graphs=on");
  EXPECT_EQ(chosen->kernels, CudaKernels::kFused);
  EXPECT_EQ(chosen->graphs, true);
  EXPECT_EQ(chosen->seed(), plain->seed());
  EXPECT_FALSE(plain->kernels.has_value() || plain->graphs.has_value());
  auto again = parse_case(chosen->id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), chosen->id());
}

TEST(CaseLine, ErrorsPointAtTheToken) {
  struct Bad {
    const char* line;
    const char* fragment;
  };
  for (const Bad& b :
       {Bad{"vae.decod model=tiny-kl", "column 1: 'vae.decod'"},
        Bad{"vae.decode model=tiny-kl res=64by64",
            "column 26: 'res=64by64': expected res=HEIGHTxWIDTH"},
        Bad{"vae.decode w=f17", "column 12: 'w=f17'"},
        Bad{"vae.decode colour=red", "unknown option"},
        Bad{"vae.decode boost=decoder.conv_out", "expected boost=LAYER*FACTOR"},
        Bad{"vae.decode tile=64:48", "tile=MIN:STRIDE needs tiling=on"},
        Bad{"video.decode framewise=off tile_frames=8:4", "that framewise=off turns off"},
        Bad{"video.decode tile_frames=8", "expected tile_frames=MIN:STRIDE in frames"},
        Bad{"vae.decode ref=f16", "the reference runs in f32 or f64"},
        Bad{"vae.decode stream=64x64+64by80", "'64by80' is not a resolution"},
        Bad{"vae.decode res=64x64 stream=64x64+64x80", "leave res= out"},
        Bad{"vae.decode stream=64x64 mem=8MB", "expected mem=SIZE"},
        Bad{"vae.decode shapes=bucket:0", "expected shapes=exact or shapes=bucket:N"},
        Bad{"vae.decode stream=64x64 tiling=on",
            "tiling=, warm=, reload= and interleave= are cases of their own"},
        Bad{"vae.decode interleave=on", "it needs vae.roundtrip or video.roundtrip without tiling"},
        Bad{"sdxl.txt2img guidance=inf", "expected guidance=SCALE"},
        Bad{"vae.decode kernels=fast", "kernels=fast is unknown; use per-op"},
        Bad{"vae.decode graphs=1", "graphs=1 is unknown; use on"},
        Bad{"sdxl.refine split=1", "expected split=F with F between 0 and 1"},
        Bad{"sdxl.denoise model=tiny-unet-xl steps=0", "expected steps=N with N from 1 to 1000"},
        Bad{"sdxl.denoise model=tiny-unet-xl guidance=-1", "expected guidance=SCALE"},
        Bad{"vae.decode steps=3", "steps= is an option of sdxl.denoise, "},
        Bad{"vae.decode steps=3", "; vae.decode does not take it: drop it"},
        Bad{"sdxl.denoise split=0.7", "split= is an option of sdxl.refine and sdxl.base+refiner"},
        Bad{"vae.decode vae=tiny-kl",
            "vae= is an option of sdxl.txt2img and sdxl.base+refiner (the VAE that decodes"},
        Bad{"vae.decode frobnicate=1", "unknown option frobnicate; a case takes model, res, "},
        Bad{"", "empty case line"}}) {
    auto c = parse_case(b.line);
    ASSERT_FALSE(c.ok()) << b.line;
    EXPECT_NE(c.error().message().find(b.fragment), std::string::npos)
        << b.line << " -> " << c.error().message();
  }
}

}  // namespace
}  // namespace tp

#include <set>

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
  for (const Bad& b : {Bad{"vae.decode model=tiny-kl\nvae.decode res=64x6a4\n",
                           "my.txt:2:12: '6a4' is not a size in pixels"},
                       Bad{"vae.decode w=f16,f17\n", "my.txt:1:12: 'w=f17'"},
                       Bad{"vae.decode,vae.decod\n", "my.txt:1:1: 'vae.decod'"},
                       Bad{"vae.decode res=40:32:4x32\n", "not a range A:B:STEP"},
                       Bad{"vae.decode tile=32:16\n", "my.txt:1: tile=MIN:STRIDE needs tiling=on"},
                       Bad{"vae.decode res=1:99999:1x1:99999:1\n",
                           "my.txt:1:12: '1:99999:1' expands to 99999 cases, more than the limit "
                           "of 20000"},
                       Bad{"vae.decode res=1:999999999:1x8\n", "999999999 cases, more than"},
                       // A sweep whose product passes the limit; a suite that passes it in total.
                       Bad{"vae.decode res=64:10064:1x64 w=f16,bf16\n",
                           "my.txt:1: this line expands to 20002 cases, more than the limit of "
                           "20000; split it"},
                       Bad{"vae.decode res=64:15063:1x64\nvae.encode res=64:15063:1x64\n",
                           "my.txt:2: with this line the suite passes the limit of 20000 cases"}}) {
    auto cases = expand_suite(b.text, "my.txt");
    ASSERT_FALSE(cases.ok()) << b.text;
    EXPECT_NE(cases.error().message().find(b.fragment), std::string::npos)
        << cases.error().message();
  }
}

// res=tiling computes its sizes from the config: tiny-kl tiles 32 px (8 latents of 4 px) every
// 24 px; tiny-taesd with tile=32:16 (video style) every 16 px.
TEST(SuiteFile, TilingGeneratorComputesBoundariesFromTheConfig) {
  auto cases = expand_suite(
      "vae.decode model=tiny-kl,tiny-taesd res=tiling tiling=on tile=0:0,32:16\n", "gen.txt");
  ASSERT_TRUE(cases.ok()) << cases.error().message();
  std::set<std::string> ids;
  for (const Case& c : *cases) ids.insert(c.id());
  for (const char* want :
       {"vae.decode model=tiny-kl res=28x32 w=f16 a=f16 acc=f32 tiling=on",  // threshold - 1 latent
        "vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32 tiling=on",  // at the threshold
        "vae.decode model=tiny-kl res=32x36 w=f16 a=f16 acc=f32 tiling=on",  // threshold + 1 latent
        "vae.decode model=tiny-kl res=24x32 w=f16 a=f16 acc=f32 tiling=on",  // the stride
        "vae.decode model=tiny-kl res=52x32 w=f16 a=f16 acc=f32 tiling=on",  // 2 strides + 1 latent
        "vae.decode model=tiny-kl res=32x16 w=f16 a=f16 acc=f32 tiling=on tile=32:16",
        "vae.decode model=tiny-taesd res=40x32 w=f16 a=f16 acc=f32 tiling=on tile=32:16"})
    EXPECT_EQ(ids.count(want), 1u) << want;
  for (const Case& c : *cases)
    EXPECT_TRUE(c.height == 32 || c.width == 32 || c.tile_min == 0) << c.id();
  EXPECT_EQ(ids.size(), cases->size());
  auto bad = expand_suite("vae.decode model=/no/such/model res=tiling tiling=on\n", "gen.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(
      bad.error().message().find("gen.txt:1: res=tiling: /no/such/model/config.json: cannot open"),
      std::string::npos)
      << bad.error().message();
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
  EXPECT_NE(missing.error().message().find(
                "neither a built-in suite (ci, field-reports, nightly, selftest)"),
            std::string::npos)
      << missing.error().message();
}

// The stress distributions have the shapes they are named for, on seeded values [1, 4, 8, 16].
TEST(StressInputs, EachDistributionHasItsShape) {
  Tensor x(DType::kF32, {1, 4, 8, 16});
  Rng rng(7, "normals");
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(rng.uniform(-2, 2));
  const int64_t inner = 8 * 16;

  const Tensor dc = stress_input(x, "dc*30", 7);  // each channel's mean is +-30, 15 or 7.5
  for (int64_t ch = 0; ch < 4; ++ch) {
    double mean = 0;
    for (int64_t i = 0; i < inner; ++i) mean += dc.data<float>()[ch * inner + i];
    mean /= double(inner);
    EXPECT_GT(std::abs(mean), 6.5) << ch;
    EXPECT_LT(std::abs(mean), 31) << ch;
  }

  const Tensor heavy = stress_input(x, "heavy", 7);  // tails the values lack (all within 2)
  double largest = 0;
  for (int64_t i = 0; i < heavy.numel(); ++i)
    largest = std::max(largest, std::abs(double(heavy.data<float>()[i])));
  EXPECT_GT(largest, 8);

  const Tensor runs = stress_input(x, "runs", 7);  // 8 equal values along the last axis
  for (int64_t i = 0; i < runs.numel(); ++i)
    if (i % 16 % 8) {
      EXPECT_EQ(runs.data<float>()[i], runs.data<float>()[i - 1]) << i;
    }
  EXPECT_NE(runs.data<float>()[8], runs.data<float>()[7]);

  const Tensor range = stress_input(x, "range", 7);  // up to a quarter of f16's range
  double above = 0;
  for (int64_t i = 0; i < range.numel(); ++i) {
    const double v = range.data<float>()[i];
    EXPECT_LE(std::abs(v), kRangeStressMax) << i;
    EXPECT_GE(std::abs(v), kRangeStressMax / 128 * (1 - 1e-6)) << i;
    EXPECT_EQ(std::signbit(v), std::signbit(x.data<float>()[i])) << i;
    above += std::abs(v) > 65504.0 / 64;
  }
  EXPECT_GT(above / double(range.numel()), 0.5);  // 4 of the 7 binades
  EXPECT_LT(above / double(range.numel()), 0.65);
}

TEST(StressInputs, AnOffsetThatIsNotANumberIsRefusedWithTheForm) {
  EXPECT_EQ(check_stress_input("range"), "");
  EXPECT_EQ(check_stress_input("dc*30"), "");
  EXPECT_NE(check_stress_input("dc*-3").find("input=dc*K with a positive offset"),
            std::string::npos);
  auto c = parse_case("vae.decode model=tiny-kl input=dc*x");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("input=dc*K"), std::string::npos) << c.error().message();
}

}  // namespace
}  // namespace tp
