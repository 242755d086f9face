// The harness across a denoising loop's steps: checkpoints named by step, each step's UNet call
// also run alone on the reference trajectory, NaN provenance that names the step, a precision
// search whose answer passes, and the text-to-image pipeline with its VAE.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/runner/case_runner.h"

namespace tp {
namespace {

CaseResult run(const std::string& line, RunOptions options = {}) {
  static ModelCache models;
  auto c = parse_case(line);
  if (!c.ok()) throw std::runtime_error(c.error().message());
  return run_case(*c, options, models);
}

const CheckpointRecord* record(const CaseResult& r, const std::string& name) {
  for (const CheckpointRecord& c : r.checkpoints)
    if (c.name == name) return &c;
  return nullptr;
}

TEST(DenoiseRun, CheckpointsAreNamedByStepAndEachStepHasItsLocalError) {
  const CaseResult r = run("sdxl.denoise model=tiny-unet-xl res=64x64 w=f16 a=f16 acc=f32 steps=3");
  EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  for (const char* step : {"step0/", "step1/", "step2/"}) {
    const std::string s = step;
    for (const std::string& name :
         {s + "conv_out", s + "up_blocks.0.attentions.0.transformer_blocks.0.attn2.residual",
          s + "scale_model_input", s + "prev_sample"})
      EXPECT_NE(record(r, name), nullptr) << name;
    const CheckpointRecord* step_alone = record(r, s + "unet:sample");
    ASSERT_NE(step_alone, nullptr) << s;
    EXPECT_TRUE(step_alone->has_local);
    EXPECT_GT(step_alone->local.rel_l2, 0);  // f16 makes error in every step
    EXPECT_LT(step_alone->local.rel_l2, step_alone->tolerance_rel_l2);
  }
  // The loop's first graph runs once: its checkpoint keeps its plain name.
  EXPECT_NE(record(r, "init_noise_sigma"), nullptr);
  EXPECT_EQ(record(r, "step3/conv_out"), nullptr);
  const CheckpointRecord* latents = record(r, "output:latents");
  ASSERT_NE(latents, nullptr);
  // The UNet's groups count with the damped output factor, the scheduler's with the plain one.
  EXPECT_NE(latents->tolerance_basis.find(" damped x 0.6"), std::string::npos)
      << latents->tolerance_basis;
}

TEST(DenoiseRun, SchedulerArithmeticIsFp32AndHandsOnLatentsInTheActivationDtype) {
  const CaseResult r = run("sdxl.denoise model=tiny-unet-xl res=64x64 w=f16 a=f16 acc=f32 steps=2");
  ASSERT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  // Guidance's difference of two close halves would lose its digits in f16; diffusers computes
  // the step in float32, and so does the compiled path: its values between groups are f32 (exact
  // on the reference's inputs), and the step's one rounding is the stored latents'.
  const CheckpointRecord* uncond = record(r, "step1/noise_pred_uncond");
  ASSERT_NE(uncond, nullptr);
  EXPECT_EQ(uncond->dtype, "f32");
  EXPECT_EQ(uncond->local.rel_l2, 0);
  const CheckpointRecord* latents = record(r, "step1/prev_sample");
  ASSERT_NE(latents, nullptr);
  EXPECT_EQ(latents->dtype, "f16");
  EXPECT_GT(latents->local.rel_l2, 0);
  EXPECT_LE(latents->local.rel_l2, std::ldexp(1.0, -11));  // one f16 rounding
}

TEST(DenoiseRun, OverflowNamesStepLayerOpAndCauseAndTheSearchAnswerPasses) {
  RunOptions search;
  search.search = true;
  const std::string line =
      "sdxl.denoise model=tiny-unet-xl res=64x64 w=f16 a=f16 acc=f32 steps=2 "
      "boost=up_blocks.0.resnets.1.conv1*300000";
  const CaseResult r = run(line, search);
  ASSERT_EQ(r.outcome, Outcome::kFailed);
  ASSERT_TRUE(r.provenance.found) << r.reason;
  EXPECT_EQ(r.provenance.step, "step0");
  EXPECT_EQ(r.provenance.layer, "up_blocks.0.resnets.1.conv1");
  EXPECT_EQ(r.provenance.op, "conv2d");
  EXPECT_EQ(r.provenance.cause, "overflow");
  EXPECT_EQ(r.provenance.checkpoint.rfind("step0/", 0), 0u) << r.provenance.checkpoint;
  EXPECT_EQ(r.reason.find("first non-finite value: step0: "), 0u) << r.reason;
  // The time embedding's add right after the conv overflows too; it runs in the time
  // projection's group (its epilogue), so the search keeps that projection beside the conv.
  ASSERT_TRUE(r.searched);
  ASSERT_EQ(r.keep_fp32, (std::vector<std::string>{"up_blocks.0.resnets.1.conv1",
                                                   "up_blocks.0.resnets.1.time_emb_proj"}))
      << r.search_note;
  const CaseResult kept =
      run(line + " keep=up_blocks.0.resnets.1.conv1+up_blocks.0.resnets.1.time_emb_proj");
  EXPECT_EQ(kept.outcome, Outcome::kPassed) << kept.reason;
}

TEST(DenoiseRun, TextToImageDecodesWithItsVaeAndNeedsOne) {
  const CaseResult r =
      run("sdxl.txt2img model=tiny-unet-xl vae=tiny-kl res=64x64 w=f16 a=f16 acc=f32 steps=2");
  EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  EXPECT_NE(record(r, "unscale_latents"), nullptr);
  EXPECT_NE(record(r, "decoder.conv_in"), nullptr);
  EXPECT_NE(record(r, "step1/unet:sample"), nullptr);
  const CheckpointRecord* image = record(r, "output:sample");
  ASSERT_NE(image, nullptr);
  EXPECT_TRUE(image->passed);

  const CaseResult missing =
      run("sdxl.txt2img model=tiny-unet-xl res=64x64 w=f16 a=f16 acc=f32 steps=2");
  EXPECT_EQ(missing.outcome, Outcome::kError);
  EXPECT_NE(missing.reason.find("decodes the latents with a VAE"), std::string::npos)
      << missing.reason;
  EXPECT_NE(missing.reason.find("vae=MODEL"), std::string::npos) << missing.reason;
}

TEST(DenoiseRun, BaseAndRefinerShareOneVaeAndTheRefinerIsNamedApart) {
  const CaseResult r =
      run("sdxl.base+refiner model=tiny-unet-xl refiner=tiny-unet-xl-refiner vae=tiny-kl "
          "res=64x64 w=f16 a=f16 acc=f32 steps=6 split=0.7");
  EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  // 6 leading steps are 831, 665, 499, 333, 167, 1; the cutoff round(1000 - 700) = 300 leaves
  // the base 4 and the refiner 2, counted from 0 in its own part.
  for (const std::string name :
       {"step3/conv_out", "refiner/step0/conv_out", "refiner/step1/conv_out",
        "refiner/step1/unet:sample", "decoder.conv_in", "refiner/decoder.conv_in", "output:sample",
        "output:base.sample", "output:base.latents"})
    EXPECT_NE(record(r, name), nullptr) << name;
  EXPECT_EQ(record(r, "step4/conv_out"), nullptr);
  EXPECT_EQ(record(r, "refiner/step2/conv_out"), nullptr);
  // Both decodes ran on one plan of the shared VAE (at the same latent size): compiled once.
  const std::string& plans = r.plan_stats;
  const std::size_t first = plans.find("plan   vae.decoder ");
  ASSERT_NE(first, std::string::npos) << plans;
  EXPECT_EQ(plans.find("plan   vae.decoder ", first + 1), std::string::npos) << plans;
  const CaseResult reloaded =
      run("sdxl.base+refiner model=tiny-unet-xl refiner=tiny-unet-xl-refiner vae=tiny-kl "
          "res=64x64 w=f16 a=f16 acc=f32 steps=4 reload=on");
  EXPECT_EQ(reloaded.outcome, Outcome::kPassed) << reloaded.reason;

  const CaseResult missing =
      run("sdxl.base+refiner model=tiny-unet-xl vae=tiny-kl res=64x64 w=f16 a=f16 acc=f32");
  EXPECT_EQ(missing.outcome, Outcome::kError);
  EXPECT_NE(missing.reason.find("refiner=MODEL"), std::string::npos) << missing.reason;
}

TEST(DenoiseRun, ResolutionStreamCountsCompilationsPerGraphAndRefusesWhatCannotFit) {
  const std::string stream =
      "sdxl.txt2img model=tiny-unet-xl vae=tiny-kl stream=64x64+56x64+64x64+64x56 w=f16 a=f16 "
      "acc=f32 steps=2";
  const CaseResult exact = run(stream);
  ASSERT_EQ(exact.outcome, Outcome::kPassed) << exact.reason;
  ASSERT_EQ(exact.stream.size(), 4u);
  EXPECT_EQ(exact.stream[2].compilations, 0);  // 64x64 again: every plan from the cache
  EXPECT_NE(exact.reason.find("unet 3, vae.decoder 3"), std::string::npos) << exact.reason;
  // Bucketed, the VAE's decoder serves the three sizes with one plan; the UNet's N-d plans are
  // exact shapes.
  const CaseResult bucketed = run(stream + " shapes=bucket:64");
  ASSERT_EQ(bucketed.outcome, Outcome::kPassed) << bucketed.reason;
  EXPECT_NE(bucketed.reason.find("unet 3, vae.decoder 1"), std::string::npos) << bucketed.reason;
  EXPECT_EQ(bucketed.stream[1].compiled_graphs,
            "euler.cfg_step 1, euler.init 1, euler.scale_model_input 1, sdxl.unscale_latents 1, "
            "unet 1");

  const CaseResult limited =
      run("sdxl.txt2img model=tiny-unet-xl vae=tiny-kl stream=64x64+64x96+64x64+72x88 w=f16 "
          "a=f16 acc=f32 steps=2 mem=240KiB");
  ASSERT_EQ(limited.outcome, Outcome::kPassed) << limited.reason;
  ASSERT_EQ(limited.stream.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(limited.stream[std::size_t(i)].refused);
  EXPECT_TRUE(limited.stream[3].refused);
  EXPECT_NE(limited.stream[3].note.find("needs"), std::string::npos) << limited.stream[3].note;
  EXPECT_LE(limited.stream[3].peak_arena_bytes, 240 * 1024);
}

}  // namespace
}  // namespace tp
