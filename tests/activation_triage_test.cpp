// `twinpath triage --activations` on dumps diffusers itself produced (tests/fixtures/activations,
// made by tools/make-activation-fixtures.sh through tools/dump_activations.py): each names the
// module, op and cause a kernel engineer would, and the clean dumps pass. The model folders are
// the ones the fixtures were dumped from, written again here by `model init` (same config, seed
// and scaled layer).
#include "harness/runner/activation_triage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace tp {
namespace {

struct DumpCase {
  const char* dump;    // tests/fixtures/activations/DUMP.safetensors
  const char* config;  // beside it
  uint64_t seed;
  const char* scale;  // model init --scale-layer, or ""
  // Expected: outcome, origin (layer, op kind, cause; "" when none), a layer the keep list must
  // hold ("" for none), and a clipped fp8 weight ("" for none).
  Outcome outcome;
  const char *layer, *op, *cause, *keep, *clipped;
  const char* unknown = "";  // a dumped module the graph has no value for ("" for none)
};

std::ostream& operator<<(std::ostream& os, const DumpCase& c) { return os << c.dump; }

std::string fixtures() { return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/activations/"; }

Model model_for(const DumpCase& c) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tp_act_" + std::string(c.dump) + "_" + std::to_string(::getpid()));
  Status s = init_model(fixtures() + c.config, c.seed, dir.string(), c.scale);
  if (!s.ok()) throw std::runtime_error(s.error().message());
  auto m = load_model(dir.string());
  std::filesystem::remove_all(dir);
  if (!m.ok()) throw std::runtime_error(m.error().message());
  return std::move(m).value();
}

class ActivationTriageTest : public ::testing::TestWithParam<DumpCase> {};

TEST_P(ActivationTriageTest, NamesTheModuleOpAndCause) {
  const DumpCase& c = GetParam();
  const Model m = model_for(c);
  auto t = triage_activations(fixtures() + c.dump + ".safetensors", m);
  ASSERT_TRUE(t.ok()) << t.error().message();
  const CaseResult& r = t->result;
  EXPECT_EQ(r.outcome, c.outcome) << r.reason;
  EXPECT_GT(t->compared, 50) << "most of the dump's modules map onto the graph";
  if (std::string(c.unknown).empty()) {
    EXPECT_TRUE(t->unknown.empty()) << t->unknown.front();
  } else {
    ASSERT_EQ(t->unknown.size(), 1u) << t->unknown.back();
    EXPECT_EQ(t->unknown.front().rfind(c.unknown, 0), 0u) << t->unknown.front();
  }
  const Provenance& p = r.provenance;
  EXPECT_EQ(p.found, std::string(c.layer) != "") << p.detail;
  if (p.found) {
    EXPECT_EQ(p.layer, c.layer);
    EXPECT_EQ(p.op, c.op);
    EXPECT_EQ(p.cause, c.cause);
    EXPECT_FALSE(std::isfinite(p.value)) << "the user's value at the element is the non-finite one";
    EXPECT_TRUE(std::isfinite(p.reference_value));
  }
  if (std::string(c.keep).empty()) {
    EXPECT_TRUE(r.keep_fp32.empty()) << r.keep_fp32.front();
  } else {
    EXPECT_NE(std::find(r.keep_fp32.begin(), r.keep_fp32.end(), c.keep), r.keep_fp32.end())
        << r.search_note;
  }
  if (std::string(c.clipped).empty()) {
    EXPECT_TRUE(t->clipped.empty()) << t->clipped.front();
  } else {
    ASSERT_FALSE(t->clipped.empty());
    EXPECT_EQ(t->clipped.front().rfind(c.clipped, 0), 0u) << t->clipped.front();
  }
  // The repro names the dump and the model folder; the reference's time is measured.
  EXPECT_EQ(r.repro.find(" DIR"), std::string::npos) << r.repro;
  EXPECT_NE(r.repro.find(" --model " + m.dir), std::string::npos) << r.repro;
  EXPECT_GT(r.reference_seconds, 0);
  // Clean dumps: every module within the tolerance for their dtype on its own dumped inputs.
  if (c.outcome == Outcome::kPassed) {
    EXPECT_TRUE(t->over_tolerance.empty()) << t->over_tolerance[0];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ActivationTriageTest,
    ::testing::Values(
        DumpCase{"kl-f32", "kl-small.json", 3, "", Outcome::kPassed, "", "", "", "", ""},
        DumpCase{"kl-f16", "kl-small.json", 3, "", Outcome::kPassed, "", "", "", "", ""},
        DumpCase{"kl-overflow-f16", "kl-small.json", 3,
                 "decoder.up_blocks.0.resnets.0.conv2*300000", Outcome::kFailed,
                 "decoder.up_blocks.0.resnets.0.conv2", "conv2d", "overflow",
                 "decoder.up_blocks.0.resnets.0.conv2", ""},
        DumpCase{"unet-f16", "unet-small.json", 5, "", Outcome::kPassed, "", "", "", "", ""},
        DumpCase{"unet-attention-f16", "unet-small.json", 5, "", Outcome::kFailed,
                 "down_blocks.0.attentions.0.transformer_blocks.0.attn1", "multi_head_attention",
                 "inf-inf", "down_blocks.0.attentions.0.transformer_blocks.0.attn1.sdpa", ""},
        DumpCase{"unet-fp8", "unet-small.json", 5, "", Outcome::kPassed, "", "", "", "", ""},
        DumpCase{"unet-fp8-clipped", "unet-small.json", 5,
                 "down_blocks.0.attentions.0.proj_in*10000", Outcome::kFailed, "", "", "",
                 "down_blocks.0.attentions.0.proj_in", "down_blocks.0.attentions.0.proj_in."},
        // WanTransformer3DModel loaded as from_pretrained(torch_dtype) loads it; its `rope`
        // module outputs position tables, which the graph's rotary ops compute inside.
        DumpCase{"wan-f16", "wan-tiny.json", 7, "", Outcome::kPassed, "", "", "", "", "", "rope "},
        DumpCase{"wan-overflow-f16", "wan-tiny.json", 7, "blocks.1.ffn.net.0.proj*60000",
                 Outcome::kFailed, "blocks.1.ffn.net.0.proj", "linear_last", "overflow",
                 "blocks.1.ffn.net.0.proj", "", "rope "},
        DumpCase{"wan-fp8", "wan-tiny.json", 7, "", Outcome::kPassed, "", "", "", "", "", "rope "}),
    [](const ::testing::TestParamInfo<DumpCase>& info) {
      std::string name = info.param.dump;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Wrong inputs: one sentence each, nothing run.
TEST(ActivationTriage, RefusesWhatIsNotADumpOfThisModel) {
  const Model kl =
      model_for({"refusal", "kl-small.json", 3, "", Outcome::kPassed, "", "", "", "", ""});
  auto not_dump = triage_activations(
      std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden/tiny-kl/io.safetensors", kl);
  ASSERT_FALSE(not_dump.ok());
  EXPECT_NE(not_dump.error().message().find("tools/dump_activations.py"), std::string::npos);
  auto other_class = triage_activations(fixtures() + "unet-f16.safetensors", kl);
  ASSERT_FALSE(other_class.ok());
  EXPECT_NE(other_class.error().message().find("UNet2DConditionModel"), std::string::npos);
  const auto dir =
      std::filesystem::temp_directory_path() / ("tp_act_tiny_kl_" + std::to_string(::getpid()));
  ASSERT_TRUE(init_model("tiny-kl", 1, dir.string()).ok());
  auto tiny = load_model(dir.string());
  ASSERT_TRUE(tiny.ok()) << tiny.error().message();
  auto other_config = triage_activations(fixtures() + "kl-f16.safetensors", *tiny);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(other_config.ok());
  EXPECT_NE(other_config.error().message().find("block_out_channels"), std::string::npos)
      << other_config.error().message();
  // A model of the same config with other weights: the dump's weight fingerprint says so, before
  // any module is blamed (the overflow dump's model had one layer scaled; this one has not).
  auto other_weights = triage_activations(fixtures() + "kl-overflow-f16.safetensors", kl);
  ASSERT_FALSE(other_weights.ok());
  EXPECT_NE(other_weights.error().message().find(
                "was dumped from other weights than --model's: 2 of "),  // weight and bias
            std::string::npos)
      << other_weights.error().message();
  EXPECT_NE(other_weights.error().message().find("(decoder.up_blocks.0.resnets.0.conv2."),
            std::string::npos);
  const Model reseeded =
      model_for({"reseeded", "kl-small.json", 4, "", Outcome::kPassed, "", "", "", "", ""});
  auto other_seed = triage_activations(fixtures() + "kl-f16.safetensors", reseeded);
  ASSERT_FALSE(other_seed.ok());
  EXPECT_NE(other_seed.error().message().find("other weights"), std::string::npos);
  auto missing = triage_activations(fixtures() + "no-such-dump.safetensors", kl);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("no-such-dump"), std::string::npos);
}

}  // namespace
}  // namespace tp
