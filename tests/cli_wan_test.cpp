// The twinpath binary on WanTransformer3DModel end to end: a seeded overflow triaged, and
// layerwise casting's refusals through exec (exit 2, one sentence).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "tests/support/command.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/user_error.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::expect_user_error;
using testing::ScratchDir;
using testing::twinpath;

class CliWanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { scratch_.emplace("cli_wan"); }
  static void TearDownTestSuite() { scratch_.reset(); }
  static std::string p(const std::string& name) { return scratch_->path(name); }

  static inline std::optional<ScratchDir> scratch_;
};

// A video DiT's block overflowing f16 (the feed-forward's first Linear scaled, as a trained
// model's outlier channels do) on diffusers' own Wan input: named by module, op, element and
// cause, and the keep list it prints passes.
TEST_F(CliWanTest, TriageNamesAnOverflowInAWanBlock) {
  const std::string layer = "blocks.1.ffn.net.0.proj";
  ASSERT_EQ(twinpath("model init --config tiny-wan --scale-layer '" + layer + "*60000' --out " +
                     p("wan-hot"))
                .code,
            0);
  const std::string run = "triage --model " + p("wan-hot") + " --pipeline wan.step --input " +
                          std::string(TWINPATH_SOURCE_DIR) +
                          "/tests/fixtures/golden-wan/tiny-wan/io.safetensors --policy "
                          "w=f16,a=f16,acc=f32 --repro " +
                          p("repro-wan.safetensors");
  const auto r = twinpath(run + " 2>/dev/null");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("origin    " + layer + " (linear_last), cause overflow, element ["),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--keep-fp32 '" + layer + "'  (passes"), std::string::npos) << r.output;
  EXPECT_EQ(twinpath(run + " --keep-fp32 '" + layer + "'").code, 0);
}

// Field report 3 through exec: a Wan model loaded in fp8 under layerwise casting is refused
// before it runs (exit 2), naming the layer, both dtypes and the fix, as are a skip list that
// casts the time embedder and projections fused after the casting; the same model loaded in
// bf16 runs and writes its sample.
TEST_F(CliWanTest, ExecRefusesALayerwiseCastModelLoadedInFp8) {
  ASSERT_EQ(twinpath("model init --config tiny-wan --out " + p("wan-lw")).code, 0);
  const std::string exec = "exec --model " + p("wan-lw") +
                           " --pipeline wan.step --path "
                           "compiled:cpu --policy w=f8e4m3,a=bf16,acc=f32,cast=layerwise --input " +
                           std::string(TWINPATH_SOURCE_DIR) +
                           "/tests/fixtures/golden-wan/tiny-wan/io.safetensors --output ";
  expect_user_error(exec + p("lw-refused.safetensors") + " --load f8e4m3",
                    "patch_embedding: weights in f8e4m3 with activations in bf16 because the "
                    "model was loaded in f8e4m3");
  EXPECT_FALSE(fs::exists(p("lw-refused.safetensors")));
  expect_user_error(exec + p("lw-refused.safetensors") + " --cast-skip '*norm*'",
                    "'time_embedder' to cast-skip=");
  expect_user_error(exec + p("lw-refused.safetensors") + " --fuse-qkv after-cast",
                    "blocks.0.attn1.to_qkv: weights in f8e4m3 with activations in bf16 because "
                    "fuse_qkv_projections() ran after enable_layerwise_casting");
  EXPECT_FALSE(fs::exists(p("lw-refused.safetensors")));
  const CommandResult ran = twinpath(exec + p("lw.safetensors"));
  EXPECT_EQ(ran.code, 0) << ran.output;
  EXPECT_TRUE(fs::exists(p("lw.safetensors")));
}

// A case on a user's Wan input whose frame count is not the case's frames= fails as an ERROR
// that says the options, not the resolution, disagree with the file.
TEST_F(CliWanTest, ACaseOnAnInputOfOtherFramesNamesTheOptions) {
  const std::string input =
      std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-wan/tiny-wan/io.safetensors";
  const CommandResult r = twinpath(
      "run --case 'wan.step model=tiny-wan res=72x56 w=f16 a=f16 acc=f32 frames=2 input=" + input +
      "' --report " + p("frames.h5"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("holds [1, 16, 3, 9, 7], not the [1, 16, 2, 9, 7] that res= and the "
                          "case's family options make; give the case the options"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace tp
