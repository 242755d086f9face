// The twinpath binary end to end: exit codes (0 ok, 2 usage/input error) and one clear
// sentence for each wrong input a user can give it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "harness/core/format.h"
#include "harness/core/names.h"
#include "harness/core/safetensors.h"
#include "harness/core/tensor_io.h"
#include "tests/support/command.h"
#include "tests/support/overflow_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/user_error.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

using testing::CommandResult;
using testing::expect_user_error;
using testing::ScratchDir;
using testing::twinpath;

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_.emplace("cli");
    ASSERT_EQ(twinpath("model init --config tiny-kl --seed 1 --out " + p("kl")).code, 0);
    ASSERT_EQ(twinpath("model init --config tiny-taesd --seed 1 --out " + p("taesd")).code, 0);
    ASSERT_TRUE(
        write_tensor_file(p("latent.safetensors"), {{"latents", patterned({1, 4, 8, 8})}}).ok());
    Tensor image(DType::kF32, {1, 3, 32, 24});
    for (int64_t i = 0; i < image.numel(); ++i)
      image.data<float>()[i] = float((i * 104729) % 200) / 100.0f - 1.0f;
    ASSERT_TRUE(write_npy(p("image.npy"), image).ok());
  }
  static void TearDownTestSuite() { scratch_.reset(); }
  static std::string p(const std::string& name) { return scratch_->path(name); }
  // Values in [-1, 1) from a fixed pattern (`salt` shifts it), as a user's saved tensor.
  static Tensor patterned(Shape shape, int salt = 0) {
    Tensor t(DType::kF32, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = float(((i + salt) * 7919) % 200) / 100.0f - 1.0f;
    return t;
  }

  static inline std::optional<ScratchDir> scratch_;
};

TEST_F(CliTest, ExecRunsEveryPipelineAndWritesNamedOutputs) {
  CommandResult r = twinpath("exec --model " + p("kl") + " --pipeline vae.decode --input " +
                             p("latent.safetensors") + " --output " + p("out.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("sample [1, 3, 32, 32] f32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" GiB peak resident\n"), std::string::npos) << r.output;
  auto out = SafetensorsFile::open(p("out.safetensors"));
  ASSERT_TRUE(out.ok());
  EXPECT_NE(out->find("sample"), nullptr);

  r = twinpath("exec --model " + p("kl") + " --pipeline vae.encode --path reference:fp64 --input " +
               p("image.npy") + " --output " + p("enc.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto enc = SafetensorsFile::open(p("enc.safetensors"));
  ASSERT_TRUE(enc.ok());
  ASSERT_NE(enc->find("logvar"), nullptr);
  EXPECT_EQ(enc->find("mean")->dtype, "F64");
  EXPECT_EQ(enc->find("mean")->shape, (Shape{1, 4, 8, 6}));

  // An encode output feeds decode (its mean is the posterior mode).
  r = twinpath("exec --model " + p("kl") + " --pipeline vae.decode --input " +
               p("enc.safetensors") + " --output " + p("dec.npy"));
  EXPECT_EQ(r.code, 0) << r.output;
  r = twinpath("exec --model " + p("taesd") + " --pipeline vae.roundtrip --input " +
               p("image.npy") + " --output " + p("rt.npy"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(twinpath("--help").code, 0);
}

TEST_F(CliTest, BadCheckpointsGetOneSentenceAndExitCode2) {
  const std::string weights = "diffusion_pytorch_model.safetensors";
  fs::create_directories(p("corrupt"));
  fs::copy_file(p("kl/config.json"), p("corrupt/config.json"));
  std::ofstream(p("corrupt/" + weights)) << "this is not a safetensors file at all";
  const std::string decode = " --pipeline vae.decode --input " + p("latent.safetensors") +
                             " --output " + p("o.safetensors");
  expect_user_error("exec --model " + p("corrupt") + decode, "not a safetensors file");

  fs::create_directories(p("truncated"));
  fs::copy_file(p("kl/config.json"), p("truncated/config.json"));
  fs::copy_file(p("kl/" + weights), p("truncated/" + weights));
  fs::resize_file(p("truncated/" + weights), fs::file_size(p("truncated/" + weights)) / 2);
  expect_user_error("exec --model " + p("truncated") + decode, "the file is truncated");

  fs::create_directories(p("mismatched"));
  fs::copy_file(p("taesd/config.json"), p("mismatched/config.json"));
  fs::copy_file(p("kl/" + weights), p("mismatched/" + weights));
  expect_user_error("exec --model " + p("mismatched") + decode,
                    "the checkpoint does not match config.json");
  EXPECT_FALSE(fs::exists(p("o.safetensors"))) << "a failed run left an output file";
}

TEST_F(CliTest, WrongInputsAndFlagsExitCode2) {
  const std::string model = "exec --model " + p("kl");
  expect_user_error(
      model + " --pipeline vae.decode --input " + p("nope.npy") + " --output " + p("o.npy"),
      "cannot open");
  expect_user_error(
      model + " --pipeline vae.decode --input " + p("image.npy") + " --output " + p("o.npy"),
      "takes a latent of shape [batch, 4, height, width]");
  expect_user_error(
      model + " --pipeline vae.blend --input " + p("image.npy") + " --output " + p("o.npy"),
      "unknown pipeline 'vae.blend'");
  expect_user_error(model + " --pipeline vae.encode --path gpu --input " + p("image.npy") +
                        " --output " + p("o.npy"),
                    "unknown path 'gpu'");
  expect_user_error(
      model + " --pipeline vae.encode --input " + p("image.npy") + " --output " + p("o.npy"),
      "holds one tensor");
  expect_user_error("exec --model " + p("nowhere") + " --pipeline vae.encode --input x --output y",
                    "no such model folder");
  expect_user_error("model init --config tiny-kll --out " + p("x"),
                    "unknown built-in config 'tiny-kll'");
  expect_user_error("model init --config tiny-kll --out " + p("x"), "did you mean tiny-kl?");
  // A config within every size limit whose weights alone pass the machine's memory (about 80 GB
  // of fp32 here): refused before any is made, naming what it needs.
  std::ofstream(p("wide.json"))
      << R"({"_class_name": "AutoencoderKL", "block_out_channels": [32768, 32768]})";
  expect_user_error("model init --config " + p("wide.json") + " --out " + p("wide"),
                    "of memory available; check its channel counts");
  EXPECT_FALSE(fs::exists(p("wide")));
  expect_user_error("exec --model " + p("kl"), "required");
  // Another model a pipeline would ignore, or more outputs than a .npy holds: refused before the
  // run.
  expect_user_error(model + " --pipeline sdxl.denoise --vae " + p("kl") + " --input " +
                        p("latent.safetensors") + " --output " + p("o.npy"),
                    "--vae is an option of sdxl.txt2img and sdxl.base+refiner (the VAE that "
                    "decodes the latents");
  expect_user_error(model + " --pipeline sdxl.denoise --vae " + p("kl") + " --input " +
                        p("latent.safetensors") + " --output " + p("o.npy"),
                    "sdxl.denoise does not take it: drop it");
  expect_user_error(model + " --pipeline sdxl.txt2img --refiner " + p("kl") + " --input " +
                        p("latent.safetensors") + " --output " + p("o.npy"),
                    "--refiner is an option of sdxl.base+refiner (");
}

TEST_F(CliTest, CompiledPathRefusesWhatItCannotRun) {
  const std::string decode = "exec --model " + p("kl") + " --pipeline vae.decode --input " +
                             p("latent.safetensors") + " --output " + p("c.safetensors");
  // Field report 3: refused at plan time, naming the layer, both dtypes and the fix.
  expect_user_error(decode + " --path compiled:cpu --policy w=bf16,a=f16,acc=f32",
                    "post_quant_conv: weights in bf16 with activations in f16 is not a combination "
                    "the compiled path has "
                    "kernels for; use w=f16 or a=bf16");
  expect_user_error(decode + " --path compiled:cpu --policy w=f16,a=f8e4m3",
                    "fp8 is a weight dtype");
  expect_user_error(decode + " --path compiled:cpu --inject softmax-no-max,typo",
                    "unknown fault 'typo'");
  expect_user_error(decode + " --path compiled:cpu --shape-policy bucket:0", "bucket:N");
  expect_user_error(decode + " --path compiled:cpu --inject arena-interval-short --validate-plan",
                    "the planner made an invalid plan: plan vae.decoder");
  expect_user_error(decode + " --policy w=f16,a=f16", "apply to the compiled path");
  expect_user_error(decode + " --repeat 0", "--repeat 0 is not a number of calls");
  EXPECT_FALSE(fs::exists(p("c.safetensors")));
  const CommandResult fp8 =
      twinpath(decode + " --path compiled:cpu --policy w=f8e4m3,a=bf16,acc=f32 --repeat 2");
  EXPECT_EQ(fp8.code, 0) << fp8.output;
  EXPECT_NE(fp8.output.find("sample [1, 3, 32, 32] bf16"), std::string::npos) << fp8.output;
  EXPECT_NE(fp8.output.find("warm "), std::string::npos) << fp8.output;  // the second call's time
}

TEST_F(CliTest, PlanFilesReloadBitwiseInANewProcessAndRefuseMismatches) {
  const std::string roundtrip =
      "exec --pipeline vae.roundtrip --path compiled:cpu --input " + p("image.npy");
  CommandResult r = twinpath(roundtrip + " --model " + p("kl") + " --output " + p("fresh.npy") +
                             " --save-plan " + p("kl.plan"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = twinpath(roundtrip + " --model " + p("kl") + " --output " + p("loaded.npy") +
               " --load-plan " + p("kl.plan"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("0 compilations, 2 loaded, 2 hits"), std::string::npos) << r.output;
  auto fresh = read_npy(p("fresh.npy")), loaded = read_npy(p("loaded.npy"));
  ASSERT_TRUE(fresh.ok() && loaded.ok());
  ASSERT_EQ(fresh->nbytes(), loaded->nbytes());
  EXPECT_EQ(std::memcmp(fresh->raw(), loaded->raw(), fresh->nbytes()), 0)
      << "a loaded plan must give the same bits";
  // Without plan files exec frees each fp32 weight once its plans have prepared it
  // (WeightStore::consume): the same bits as the run above, which kept them.
  r = twinpath(roundtrip + " --model " + p("kl") + " --output " + p("consumed.npy"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto consumed = read_npy(p("consumed.npy"));
  ASSERT_TRUE(consumed.ok());
  ASSERT_EQ(consumed->nbytes(), fresh->nbytes());
  EXPECT_EQ(std::memcmp(fresh->raw(), consumed->raw(), fresh->nbytes()), 0)
      << "freeing the checkpoint as it is prepared must not change the bits";

  // Other weights (same architecture), other options, another version, damaged files.
  ASSERT_EQ(twinpath("model init --config tiny-kl --seed 2 --out " + p("kl2")).code, 0);
  const std::string out = " --output " + p("x.npy") + " --load-plan ";
  expect_user_error(roundtrip + " --model " + p("kl2") + out + p("kl.plan"),
                    "its plans were made for other weights");
  expect_user_error(roundtrip + " --model " + p("taesd") + out + p("kl.plan"),
                    "made for another architecture");
  expect_user_error(
      roundtrip + " --model " + p("kl") + " --policy w=bf16,a=bf16" + out + p("kl.plan"),
      "was made with policy 'w=f16,a=f16,acc=f32' but this run asks for 'w=bf16,a=bf16,acc=f32'");
  std::ifstream in(p("kl.plan"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(p("truncated.plan")) << text.substr(0, text.size() / 2);
  expect_user_error(roundtrip + " --model " + p("kl") + out + p("truncated.plan"), "is truncated");
  std::string flipped = text;
  flipped[flipped.find("\"offset\":") + 9] ^= 1;
  std::ofstream(p("flipped.plan")) << flipped;
  expect_user_error(roundtrip + " --model " + p("kl") + out + p("flipped.plan"),
                    "is corrupt (its checksum does not match");
  // A stated rounding point changed, checksum made right: the contract no longer matches.
  {
    const std::size_t body = text.find('\n') + 1, end = text.find('\n', body);
    std::string changed = text.substr(body, end - body);
    const std::string stated = "nearest even, overflow to inf";
    ASSERT_NE(changed.find(stated), std::string::npos);
    changed.replace(changed.find(stated), stated.size(), "toward zero, overflow to max");
    uint64_t h = 1469598103934665603ull;  // the file's FNV-1a
    for (unsigned char ch : changed) h = (h ^ ch) * 1099511628211ull;
    char sum[17];
    std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(h));
    std::ofstream(p("contract.plan"))
        << text.substr(0, body) << changed << "\nchecksum " << sum << "\n";
    expect_user_error(roundtrip + " --model " + p("kl") + out + p("contract.plan"),
                      "plan states another numerics contract than this twinpath gives it");
  }
  std::ofstream(p("future.plan")) << "twinpath-plan 99\n" << text.substr(text.find('\n') + 1);
  expect_user_error(roundtrip + " --model " + p("kl") + out + p("future.plan"),
                    "is plan format 99");
  expect_user_error(roundtrip + " --model " + p("kl") + out + p("image.npy"),
                    "is not a twinpath plan file");
  expect_user_error(roundtrip + " --model " + p("kl") + out + p("missing.plan"),
                    "cannot open the plan file");
  EXPECT_FALSE(fs::exists(p("x.npy")));
}

}  // namespace
}  // namespace tp

namespace tp {
namespace {

// A user's text-to-image run: the overflow is named with its step, and the fix passes.
TEST_F(CliTest, TriageNamesTheStepOfAnOverflowInTheDenoisingLoop) {
  const std::string layer = "up_blocks.0.resnets.1.conv1";
  ASSERT_EQ(twinpath("model init --config tiny-unet-xl --scale-layer '" + layer +
                     "*300000' --out " + p("unet-hot"))
                .code,
            0);
  ASSERT_EQ(twinpath("model init --config tiny-kl --out " + p("vae")).code, 0);
  NamedTensors inputs;
  inputs.emplace_back("latents", patterned({1, 4, 8, 8}));
  inputs.emplace_back("prompt_embeds", patterned({1, 77, 32}, 1));
  inputs.emplace_back("pooled_prompt_embeds", patterned({1, 32}, 2));
  inputs.emplace_back("negative_prompt_embeds", patterned({1, 77, 32}, 3));
  inputs.emplace_back("negative_pooled_prompt_embeds", patterned({1, 32}, 4));
  ASSERT_TRUE(write_tensor_file(p("prompt.safetensors"), inputs).ok());
  const std::string run = "triage --model " + p("unet-hot") + " --vae " + p("vae") +
                          " --pipeline sdxl.txt2img --steps 3 --input " + p("prompt.safetensors") +
                          " --policy w=f16,a=f16,acc=f32 --repro " + p("repro-loop.safetensors");
  const auto r = twinpath(run + " 2>/dev/null");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("origin    step0, " + layer + " (conv2d), cause overflow"),
            std::string::npos)
      << r.output;
  // The time embedding's add after the conv overflows too; it runs in the time projection's
  // group, so the fix keeps that projection beside the conv.
  const std::string keep = "up_blocks.0.resnets.1.conv1,up_blocks.0.resnets.1.time_emb_proj";
  EXPECT_NE(r.output.find("--keep-fp32 '" + keep + "'  (passes"), std::string::npos) << r.output;
  const auto fixed = twinpath(run + " --keep-fp32 '" + keep + "'");
  EXPECT_EQ(fixed.code, 0) << fixed.output;
  const auto replay = twinpath("replay " + p("repro-loop.safetensors"));
  EXPECT_NE(replay.output.find("origin: " + layer + " (conv2d), cause overflow"), std::string::npos)
      << replay.output;
}

// A dump of the user's own stack (diffusers in fp16, tests/fixtures/activations): exit 1 and the
// origin's fields in --json and the HDF5 report on a finding, exit 0 on a clean dump.
TEST_F(CliTest, TriageOfAUsersActivationDump) {
  const std::string fx = testing::activation_fixtures();
  ASSERT_EQ(testing::init_overflow_user_model(p("user_kl")).code, 0);
  const auto r =
      twinpath("triage --json --activations " + fx + "kl-overflow-f16.safetensors" + " --model " +
               p("user_kl") + " --report " + p("dump.h5") + " 2>/dev/null");
  EXPECT_EQ(r.code, 1) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["outcome"], "FAILED");
  EXPECT_EQ(j["origin"]["layer"], "decoder.up_blocks.0.resnets.0.conv2");
  EXPECT_EQ(j["origin"]["op"], "conv2d");
  EXPECT_EQ(j["origin"]["cause"], "overflow");
  EXPECT_EQ(j["activations"]["pipeline"], "vae.decode");
  EXPECT_TRUE(j["activations"]["unknown"].empty());
  const auto shown = twinpath("report show " + p("dump.h5"));
  EXPECT_EQ(shown.code, 1) << shown.output;  // the report holds a failed case
  EXPECT_NE(shown.output.find("keep in fp32"), std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("decoder.up_blocks.0.resnets.0.conv2"), std::string::npos)
      << shown.output;
  ASSERT_EQ(
      twinpath("model init --config " + fx + "kl-small.json --seed 3 --out " + p("clean_kl")).code,
      0);
  const auto clean =
      twinpath("triage --activations " + fx + "kl-f32.safetensors --model " + p("clean_kl"));
  EXPECT_EQ(clean.code, 0) << clean.output;
  EXPECT_NE(clean.output.find("PASSED"), std::string::npos) << clean.output;
}

// Done-when of the harness: the SDXL-VAE failure (one layer's weights scaled past f16) triaged
// from a user's model folder: layer, op, cause, and a --keep-fp32 list that makes it pass.
TEST_F(CliTest, TriageNamesTheOverflowingLayerAndAFixThatPasses) {
  const std::string layer = "decoder.up_blocks.0.resnets.0.conv1";
  ASSERT_EQ(twinpath("model init --config tiny-kl --seed 4 --scale-layer '" + layer +
                     "*1e5' --out " + p("sdxlish"))
                .code,
            0);
  ASSERT_TRUE(write_npy(p("user_latent.npy"), patterned({1, 4, 16, 16})).ok());
  const auto r =
      twinpath("triage --json --model " + p("sdxlish") + " --pipeline vae.decode --input " +
               p("user_latent.npy") + " --policy w=f16,a=f16,acc=f32 --repro " +
               p("repro.safetensors") + " 2>/dev/null");
  EXPECT_EQ(r.code, 1) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["outcome"], "FAILED");
  EXPECT_EQ(j["origin"]["layer"], layer);
  EXPECT_EQ(j["origin"]["op"], "conv2d");
  EXPECT_EQ(j["origin"]["cause"], "overflow");
  EXPECT_EQ(j["origin"]["index"].size(), 4u);
  EXPECT_GT(std::fabs(j["origin"]["reference_value"].get<double>()), 65504);
  ASSERT_EQ(j["keep_fp32"], nlohmann::json::array({layer}));

  // The suggested list makes the user's case pass.
  const auto fixed = twinpath("triage --model " + p("sdxlish") + " --pipeline vae.decode --input " +
                              p("user_latent.npy") + " --keep-fp32 " + layer + " --repro " +
                              p("unused.safetensors"));
  EXPECT_EQ(fixed.code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("PASSED"), std::string::npos) << fixed.output;

  // The minimal repro runs the origin group alone and finds the same op and cause.
  const auto replay = twinpath("replay " + p("repro.safetensors"));
  EXPECT_EQ(replay.code, 1) << replay.output;
  EXPECT_NE(replay.output.find("origin: " + layer + " (conv2d), cause overflow"), std::string::npos)
      << replay.output;
  const auto not_repro = twinpath("replay " + p("latent.safetensors"));
  EXPECT_EQ(not_repro.code, 2);
  EXPECT_NE(not_repro.output.find("is not a twinpath repro"), std::string::npos)
      << not_repro.output;
}

// A conv fused with its bias and the residual add (one group, one store): the conv's fp32 value
// is already past f16's range, so the conv is the origin, not the add where the group stores
// it, and the precision search starts from it.
TEST_F(CliTest, TriageNamesTheConvThatLeftTheRangeInsideAFusedResidualGroup) {
  const std::string resnet = "decoder.up_blocks.1.resnets.0";
  ASSERT_EQ(twinpath("model init --config tiny-kl --seed 4 --scale-layer '" + resnet +
                     ".conv2*1e6' --out " + p("fused_overflow"))
                .code,
            0);
  ASSERT_TRUE(write_npy(p("fused_latent.npy"), patterned({1, 4, 16, 16})).ok());
  const auto r =
      twinpath("triage --json --model " + p("fused_overflow") + " --pipeline vae.decode --input " +
               p("fused_latent.npy") + " --policy w=f16,a=f16,acc=f32 2>/dev/null");
  EXPECT_EQ(r.code, 1) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_EQ(j["origin"]["layer"], resnet + ".conv2") << r.output;
  EXPECT_EQ(j["origin"]["op"], "conv2d");
  EXPECT_EQ(j["origin"]["cause"], "overflow");
  EXPECT_EQ(j["origin"]["stored_layer"], resnet + ".add") << r.output;
  EXPECT_EQ(j["origin"]["stored_op"], "add");
  EXPECT_GT(std::fabs(j["origin"]["value"].get<double>()), 65504);
  ASSERT_FALSE(j["keep_fp32"].empty()) << r.output;
  EXPECT_EQ(j["keep_fp32"][0], resnet + ".conv2") << r.output;
}

// A typo that would expand to 100,000 cases is refused before anything runs, by run and by
// cases list alike, with the count and the line.
// A case too large for memory is refused from its shapes before anything of its size exists
// (it grew past 12.9 GB before the budget), with the figure, the budget and what to do; the
// budget is the case's mem=, else --mem, else the available memory.
TEST_F(CliTest, ACaseTooLargeForMemoryIsRefusedBeforeItAllocates) {
  const testing::MeasuredResult huge = testing::twinpath_measured(
      "run --case 'vae.decode model=tiny-kl res=65536x65536 w=f16 a=f16 acc=f32' --report " +
      p("huge.h5"));
  EXPECT_EQ(huge.code, 1) << huge.output;
  for (const char* part : {"res=65536x65536 needs about", "GiB", "over the memory budget of",
                           "refused before allocating", "tiling=on", "--mem SIZE"})
    EXPECT_NE(huge.output.find(part), std::string::npos) << part << "\n" << huge.output;
  EXPECT_LT(huge.peak_bytes, int64_t(1) << 30);
  const std::string decode = "run --case 'vae.decode model=tiny-kl res=256x256 w=f16 a=f16 acc=f32";
  CommandResult r = twinpath(decode + " mem=64MiB' --mem 64GiB --report " + p("mem.h5"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("over the memory budget of 64.00 MiB (the case's mem=)"),
            std::string::npos)
      << r.output;
  r = twinpath(decode + "' --mem 64MiB --report " + p("mem.h5"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("over the memory budget of 64.00 MiB (--mem)"), std::string::npos)
      << r.output;
  expect_user_error(decode + "' --mem 12x", "--mem 12x is not a size");
}

TEST_F(CliTest, ASuitePastTheCaseLimitIsRefusedBeforeRunning) {
  std::ofstream(p("huge.txt")) << "# a typo: 1:100000:1 for 1:100000:1000\n"
                               << "vae.decode model=tiny-kl res=1:100000:1x64 w=f16\n";
  for (const std::string command : {"run --suite ", "cases list --suite "}) {
    const auto r = twinpath(command + p("huge.txt"));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("huge.txt:2:26: '1:100000:1' expands to 100000 cases, more than the "
                            "limit of 20000"),
              std::string::npos)
        << r.output;
  }
}

// A case the user named that cannot run says why on its line, with its repro, and the run exits
// 2; the same refusal inside a suite is counted by reason and the run exits 0.
TEST_F(CliTest, ANamedCaseThatCannotRunSaysWhyWithItsReproAndExits2) {
  const std::string line = "vae.decode model=tiny-kl res=64x64 w=bf16 a=f16 acc=f32";
  auto r = twinpath("run --case '" + line + "'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("UNSUPPORTED " + line), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weights in bf16 with activations in f16 is not a combination"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("repro: twinpath run --case '" + line + "'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 of the cases given by --case could not run here"), std::string::npos)
      << r.output;
  // The reason of an accumulation dtype the compiled path lacks reads whole in the summary.
  r = twinpath("run --case 'vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=bf16'");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("1 acc=bf16 is not an accumulation dtype of the compiled path"),
            std::string::npos)
      << r.output;
  if (::access("/dev/nvidia0", F_OK) != 0) {  // no GPU: the CUDA case is skipped, named so
    r = twinpath("run --device cuda --case '" + line.substr(0, line.find(" w=")) + "'");
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find("SKIPPED"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("repro: twinpath run --device cuda --case"), std::string::npos)
        << r.output;
  }
  // The report keeps the command line as it can be pasted back into a shell.
  const std::string ok = "vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32";
  r = twinpath("run --case '" + ok + "' --report " + p("quoted.h5"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = twinpath("report show " + p("quoted.h5"));
  EXPECT_NE(r.output.find("twinpath run --case '" + ok + "' --report " + p("quoted.h5")),
            std::string::npos)
      << r.output;
  std::ofstream(p("refused.txt")) << line << "\nvae.decode model=tiny-kl res=64x64 w=f16\n";
  r = twinpath("run --suite " + p("refused.txt"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("UNSUPPORTED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 unsupported, 1 passed, 0 failed"), std::string::npos) << r.output;
}

// An empty suite, a shard count of 0 and a model of the wrong family each get the sentence that
// names what is wrong (with the article its noun takes).
TEST_F(CliTest, EmptySuitesZeroShardsAndWrongFamiliesAreNamedAsSuch) {
  std::ofstream(p("empty.txt")) << "# only a comment\n\n";
  expect_user_error("run --suite " + p("empty.txt"),
                    "the suite " + p("empty.txt") + " has no cases (only comments or blank lines)");
  expect_user_error("run --shard 0/0", "N (the number of shards) is at least 1");
  expect_user_error("exec --model " + p("kl") + " --pipeline unet.step --input " + p("image.npy") +
                        " --output " + p("u.safetensors"),
                    "is an AutoencoderKL, which runs");
  EXPECT_EQ(with_article("image"), "an image");
  EXPECT_EQ(shell_quote("--case"), "--case");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  const std::vector<std::string> argv = {"run", "--case", "vae.decode res=64x64", "it's", ""};
  std::string line;
  for (const std::string& a : argv) line += (line.empty() ? "" : " ") + shell_quote(a);
  EXPECT_EQ(shell_split(line), argv) << line;
  EXPECT_EQ(with_article("UNet2DConditionModel"), "a UNet2DConditionModel");
}

// A mistake in what the user typed stops the run once, before anything runs, with exit 2 and
// the name it most likely meant; it is not an ERROR outcome per matching case.
TEST_F(CliTest, TypedMistakesInCasesExit2OnceBeforeRunning) {
  const std::string line = "vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32";
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"run --case 'vae.decode model=tiny_kl res=32x32'", "did you mean tiny-kl?"},
           {"run --case '" + line + " tilling=on'",
            "unknown option tilling (did you mean tiling?)"},
           {"run --case 'vae.decode model=tiny-kl res=63x64'", "res=63x64 is not a multiple"},
           {"run --case '" + line + "' --inject f16-store-trunc",
            "did you mean f16-store-truncate?"},
           {"run --case 'vae.decod model=tiny-kl'", "did you mean vae.decode?"}}) {
    const CommandResult r = twinpath(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(fragment), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("ERROR "), std::string::npos) << r.output;
  }
  // --model over a suite: one sentence for every case it touches, nothing run.
  std::ofstream(p("three.txt")) << "vae.decode,vae.encode model=tiny-kl res=32x32,48x32 w=f16 "
                                   "a=f16 acc=f32\n";
  const CommandResult missing = twinpath("run --suite " + p("three.txt") + " --model " + p("none"));
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("is neither a built-in model"), std::string::npos);
  EXPECT_NE(missing.output.find("[4 cases, the first"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("nothing ran"), std::string::npos);
  expect_user_error("run --suite " + p("three.txt") + " --model tiny-unet", "which runs unet.step");
  // A report or JUnit path that cannot be written: said before the first case runs.
  const CommandResult unwritable =
      twinpath("run --suite " + p("three.txt") + " --report " + p("no/such/folder/r.h5"));
  EXPECT_EQ(unwritable.code, 2) << unwritable.output;
  EXPECT_NE(unwritable.output.find("does not exist; create it first"), std::string::npos)
      << unwritable.output;
  EXPECT_EQ(unwritable.output.find("PASSED"), std::string::npos) << unwritable.output;
  expect_user_error(
      "run --suite " + p("three.txt") + " --report " + p("r.h5") + " --junit " + p(""),
      "is a folder; name a file in it");
  EXPECT_EQ(closest_name("TINY_KL", {"tiny-taesd", "tiny-kl"}), "tiny-kl");
  EXPECT_EQ(closest_name("tiny-k", {"tiny-kl", "sd-kl"}), "tiny-kl");
  EXPECT_EQ(closest_name("quantum", {"tiny-kl", "sd-kl"}), "");
}

// model init --scale-layer says from which factor the layer's output leaves f16's range; a
// factor past it overflows there, one below it does not.
TEST_F(CliTest, ScaleLayerNamesTheFactorThatOverflowsF16) {
  const std::string layer = "decoder.up_blocks.0.resnets.0.conv2";
  const CommandResult measured = twinpath("model init --config tiny-kl --seed 1 --scale-layer '" +
                                          layer + "*1' --out " + p("measured"));
  ASSERT_EQ(measured.code, 0) << measured.output;
  const std::string said = "leaves f16 (max 65504) from a factor of about ";
  const std::size_t at = measured.output.find(said);
  ASSERT_NE(at, std::string::npos) << measured.output;
  const double factor = std::strtod(measured.output.c_str() + at + said.size(), nullptr);
  ASSERT_GT(factor, 1);
  for (const double k : {4.0, 0.25}) {
    const std::string dir = p(k > 1 ? "past" : "below");
    ASSERT_EQ(twinpath("model init --config tiny-kl --seed 1 --scale-layer '" + layer + "*" +
                       std::to_string(k * factor) + "' --out " + dir)
                  .code,
              0);
    const CommandResult r = testing::shell(
        std::string("(") + TWINPATH_BINARY + " run --json --report " + p("scaled.h5") +
        " --case 'vae.decode model=" + dir + " res=64x64 w=f16 a=f16 acc=f32' 2>/dev/null)");
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.output;
    const auto& c = j["cases"][0];
    const bool overflowed = c.contains("origin") && c["origin"].value("layer", "") == layer;
    EXPECT_EQ(overflowed, k > 1) << c.dump(2);
  }
}

TEST_F(CliTest, TriageRefusesWrongInputsClearly) {
  expect_user_error(
      "triage --model " + p("nope") + " --pipeline vae.decode --input " + p("latent.safetensors"),
      "no such model folder");
  expect_user_error(
      "triage --model " + p("kl") + " --pipeline vae.decode --input " + p("image.npy"), "");
  expect_user_error("triage --model " + p("kl") + " --pipeline vae.decode --input " +
                        p("latent.safetensors") + " --policy w=f16,x=1",
                    "--policy field 'x=1' is unknown");
  expect_user_error("triage --model " + p("kl") + " --pipeline vae.decode --input " +
                        p("latent.safetensors") + " --report " + p("gone/t.h5"),
                    "--report " + p("gone/t.h5") + ": the folder " + p("gone") + " does not exist");
  expect_user_error("run --case 'vae.decod model=tiny-kl'", "column 1");
  // The CUDA backend's choices need the CUDA device; an unknown one names the flag.
  expect_user_error("run --kernels fused --case 'vae.decode model=tiny-kl res=64x64'",
                    "--kernels and --cuda-graphs choose how the CUDA backend runs; add --device "
                    "cuda");
  expect_user_error("run --device cuda --kernels fast --case 'vae.decode model=tiny-kl'",
                    "--kernels fast is unknown; use per-op");
}

}  // namespace
}  // namespace tp
