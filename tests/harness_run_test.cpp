// The harness's runner on the built-in tiny models: capture does not perturb, verdicts and
// outcomes, local vs accumulated error, NaN provenance, precision search, and the tolerance
// table against the measured fp32-vs-fp64 noise floor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/core/compare.h"
#include "harness/core/format.h"
#include "harness/core/tensor_io.h"
#include "harness/models/vae/procedural_image.h"
#include "harness/models/vae/tiling.h"
#include "harness/models/vae/vae_graphs.h"
#include "harness/runner/activation_triage.h"
#include "harness/runner/case_runner.h"
#include "harness/runner/memory_budget.h"
#include "harness/runner/runs.h"
#include "harness/runner/tolerance.h"
#include "reference/executor.h"
#include "tests/support/case_line.h"
#include "tests/support/command.h"

namespace tp {
namespace {

using testing::case_of;

CaseResult run(const std::string& line, RunOptions options = {}) {
  static ModelCache models;
  return run_case(case_of(line), options, models);
}

const CheckpointRecord* record(const CaseResult& r, const std::string& name) {
  for (const CheckpointRecord& c : r.checkpoints)
    if (c.name == name) return &c;
  return nullptr;
}

// Every output of the plain run equals the watched run's output of that name, bit for bit (a
// watched roundtrip also returns the encoder's outputs).
bool bitwise_equal(const NamedTensors& watched, const NamedTensors& plain) {
  for (const auto& [name, t] : plain) {
    const Tensor* w = find_tensor(watched, name);
    if (!w || w->shape() != t.shape() || w->dtype() != t.dtype() ||
        std::memcmp(w->raw(), t.raw(), t.nbytes()) != 0)
      return false;
  }
  return !plain.empty();
}

// A case made concrete by hand (inputs from a sine), for tests of the runner's pieces.
PreparedCase prepared(const std::string& line, ModelCache& models) {
  PreparedCase p;
  p.c = case_of(line);
  p.model = *models.get(p.c.model);
  if (!p.c.warm.empty()) p.warm = *models.get(p.c.warm);
  p.pipeline = p.c.pipeline;
  const bool decode = p.pipeline == "vae.decode";
  const int ds = decode ? vae_config(*p.model).downscale() : 1;
  p.input = Tensor(DType::kF32, {1, decode ? vae_config(*p.model).latent_channels() : 3,
                                 p.c.height / ds, p.c.width / ds});
  for (int64_t i = 0; i < p.input.numel(); ++i)
    p.input.data<float>()[i] = float(std::sin(double(i) * 0.37));
  p.session.policy.base = p.c.policy;
  std::string faults;
  for (const std::string& f : p.c.inject) faults += (faults.empty() ? "" : ",") + f;
  p.session.faults = *compiled::parse_faults(faults);
  return p;
}

// Instrumented (every group's outputs copied out) and plain runs give bitwise-equal outputs.
TEST(HarnessRun, CaptureDoesNotPerturbTheCompiledRun) {
  ModelCache models;
  for (const char* line : {"vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32",
                           "vae.roundtrip model=tiny-kl res=64x64 w=f8e4m3 a=bf16 acc=f32",
                           "vae.encode model=tiny-taesd res=64x64 w=bf16 a=bf16 acc=f32",
                           "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f16"}) {
    const PreparedCase p = prepared(line, models);
    auto watched = run_compiled(p, p.session.policy, true);
    auto plain = run_compiled(p, p.session.policy, false);
    ASSERT_TRUE(watched.ok() && plain.ok()) << line;
    EXPECT_FALSE(watched->groups.empty()) << line;
    EXPECT_TRUE(plain->groups.empty()) << line;
    EXPECT_TRUE(bitwise_equal(watched->outputs, plain->outputs)) << line;
  }
}

// Shared runtimes give the isolated runs' bits, and say where they stop doing so.
TEST(HarnessRun, SharedRuntimesMustEqualIsolatedRunsBitwise) {
  ModelCache models;
  for (const char* line :
       {"vae.roundtrip model=tiny-kl res=64x64 w=f16 a=f16 acc=f32",
        "vae.decode model=tiny-kl res=64x64 w=bf16 a=bf16 acc=f32 warm=tiny-kl@1"}) {
    const PreparedCase p = prepared(line, models);
    auto run = run_compiled(p, p.session.policy, true);
    ASSERT_TRUE(run.ok()) << line;
    EXPECT_EQ(check_isolation(p, *run), "") << line;
    EXPECT_EQ(check_plan_reload(p), "") << line;
  }
  const PreparedCase aliased = prepared(
      "vae.roundtrip model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 inject=arena-alias", models);
  auto run = run_compiled(aliased, aliased.session.policy, true);
  ASSERT_TRUE(run.ok());
  const std::string why = check_isolation(aliased, *run);
  EXPECT_NE(why.find("vae.encoder and vae.decoder co-resident: output encoder.mean differs from "
                     "the isolated run"),
            std::string::npos)
      << why;
  const PreparedCase stale = prepared(
      "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 warm=tiny-kl@1 "
      "inject=cache-key-ignores-weights",
      models);
  auto stale_run = run_compiled(stale, stale.session.policy, true);
  ASSERT_TRUE(stale_run.ok());
  const std::string stale_why = check_isolation(stale, *stale_run);
  EXPECT_NE(stale_why.find("first checkpoint that differs: post_quant_conv"), std::string::npos)
      << stale_why;
}

TEST(HarnessRun, CleanCasesPassOnEveryPolicy) {
  for (const char* policy :
       {"w=f16 a=f16 acc=f32", "w=bf16 a=bf16 acc=f32", "w=f8e4m3 a=f16 acc=f32",
        "w=f8e5m2 a=bf16 acc=f32", "w=f32 a=f32 acc=f32", "w=f16 a=f16 acc=f16"})
    for (const char* model : {"tiny-kl", "tiny-taesd"}) {
      const CaseResult r =
          run(std::string("vae.roundtrip model=") + model + " res=64x64 " + policy);
      EXPECT_EQ(r.outcome, Outcome::kPassed) << r.id << ": " << r.reason;
      EXPECT_GT(r.checkpoints.size(), 20u) << r.id;
      for (const CheckpointRecord& c : r.checkpoints)
        EXPECT_TRUE(c.passed) << r.id << " " << c.name;
    }
}

// kernels= and graphs= choose how the CUDA backend runs: on the CPU emulation the case is
// skipped, saying so; on CUDA the repro names the device and the choice the case ran with.
TEST(HarnessRun, CudaChoicesSkipOnTheCpuAndAreWrittenInACudaRepro) {
  const CaseResult cpu =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 kernels=fused");
  EXPECT_EQ(cpu.outcome, Outcome::kSkipped);
  EXPECT_NE(cpu.reason.find("add --device cuda"), std::string::npos) << cpu.reason;
  auto c = parse_case("vae.decode model=tiny-kl res=64x64 graphs=on");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(case_repro(*c, compiled::Device::kCuda, CudaChoice{CudaKernels::kFused, true}),
            "twinpath run --device cuda --case 'vae.decode model=tiny-kl res=64x64 w=f16 a=f16 "
            "acc=f32 kernels=fused graphs=on'");
  EXPECT_EQ(case_repro(*c, compiled::Device::kCpu, CudaChoice{}), repro_command(*c));
}

// The harness's own table of supported dtype combinations agrees with the compiled path's
// refusals on every combination (ci runs them all: a disagreement fails the case).
TEST(HarnessRun, SupportTableAgreesWithTheCompiledPath) {
  int supported = 0;
  for (const char* w : {"f32", "f16", "bf16", "f8e4m3", "f8e5m2"})
    for (const char* a : {"f32", "f16", "bf16", "f8e4m3"})
      for (const char* acc : {"f32", "f16"}) {
        Case c = case_of(std::string("vae.decode w=") + w + " a=" + a + " acc=" + acc);
        auto policy = compiled::parse_layer_policy(c.policy_text());
        const bool runs = policy.ok() && compiled::check_supported("layer", *policy).ok();
        EXPECT_EQ(expected_supported(c), runs) << c.policy_text();
        supported += runs;
      }
  EXPECT_EQ(supported, 12);
}

// The layer that creates error stands out by its local error; the layers after it carry the
// error on (accumulated) while their own local error stays within tolerance.
TEST(HarnessRun, LocalErrorNamesTheCulpritLayer) {
  const CaseResult r =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 inject=upsample-off-by-one");
  ASSERT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_NE(r.reason.find("decoder.up_blocks.0.upsamplers.0"), std::string::npos) << r.reason;
  const CheckpointRecord* culprit = record(r, "decoder.up_blocks.0.upsamplers.0");
  ASSERT_TRUE(culprit && culprit->has_local);
  EXPECT_GT(culprit->local.rel_l2, 10 * culprit->tolerance_rel_l2);
  const CheckpointRecord* after = record(r, "decoder.up_blocks.1.resnets.0.conv1");
  ASSERT_TRUE(after && after->has_local);
  EXPECT_LT(after->local.rel_l2, after->tolerance_rel_l2);
  EXPECT_GT(after->accumulated.rel_l2, 10 * after->tolerance_rel_l2);
  EXPECT_FALSE(r.provenance.found);  // no NaN: nothing to trace
}

// The SDXL-VAE failure: one layer's weights scaled so its output overflows f16.
TEST(HarnessRun, OverflowIsTracedToItsLayerAndFixedByKeepingItInFp32) {
  const std::string layer = "decoder.up_blocks.0.resnets.0.conv1";
  const std::string line =
      "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 boost=" + layer + "*100000";
  RunOptions search;
  search.search = true;
  const CaseResult r = run(line, search);
  ASSERT_EQ(r.outcome, Outcome::kFailed) << r.reason;
  const Provenance& p = r.provenance;
  ASSERT_TRUE(p.found) << p.detail;
  EXPECT_EQ(p.layer, layer);
  EXPECT_EQ(p.op, "conv2d");
  EXPECT_EQ(p.cause, "overflow");
  EXPECT_EQ(p.dtype_max, 65504);
  EXPECT_GT(std::fabs(p.value), 65504);
  EXPECT_GT(std::fabs(p.reference_value), 65504);
  EXPECT_NEAR(p.value, p.reference_value, 1e-2 * std::fabs(p.reference_value));
  ASSERT_EQ(p.index.size(), 4u);
  ASSERT_TRUE(r.searched);
  EXPECT_EQ(r.keep_fp32, std::vector<std::string>{layer}) << r.search_note;
  const CaseResult fixed = run(line + " keep=" + layer);
  EXPECT_EQ(fixed.outcome, Outcome::kPassed) << fixed.reason;
}

// fp8 scales calibrated below the largest weight (clip=) with sat=nonsat: the weights above
// overflow (NaN in e4m3, inf in e5m2) and the origin is the first layer that reads them, with
// the cause in its weights, not in its finite inputs. expect=failed turns that into a pass, and
// the clean satfinite case into a failure.
TEST(HarnessRun, Fp8WeightsOverflowingTheirClippedScaleAreNamedAsTheCause) {
  for (const char* w : {"f8e4m3", "f8e5m2"}) {
    const std::string line = std::string("vae.decode model=tiny-kl res=64x64 w=") + w +
                             " a=f16 acc=f32 scale=tensor clip=0.9";
    const CaseResult r = run(line + " sat=nonsat");
    ASSERT_EQ(r.outcome, Outcome::kFailed) << r.reason;
    ASSERT_TRUE(r.provenance.found) << r.provenance.detail;
    EXPECT_EQ(r.provenance.cause, "non-finite-weight") << r.provenance.detail;
    EXPECT_EQ(r.provenance.layer, "post_quant_conv") << r.provenance.detail;
    EXPECT_NE(r.provenance.detail.find("sat=nonsat"), std::string::npos) << r.provenance.detail;
    EXPECT_NE(r.provenance.detail.find("0.9-quantile"), std::string::npos) << r.provenance.detail;
    const CaseResult expected = run(line + " sat=nonsat expect=failed");
    EXPECT_EQ(expected.outcome, Outcome::kPassed) << expected.reason;
    EXPECT_EQ(expected.reason.rfind("failed as expected", 0), 0u) << expected.reason;
    EXPECT_EQ(run(line).outcome, Outcome::kPassed) << "satfinite keeps the weights finite";
    EXPECT_EQ(run(line + " expect=failed").outcome, Outcome::kFailed);
  }
}

TEST(HarnessRun, InjectedKernelFaultIsNamedAsTheCause) {
  const CaseResult r =
      run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 input=normal*300 "
          "inject=groupnorm-f16-accum");
  ASSERT_EQ(r.outcome, Outcome::kFailed);
  ASSERT_TRUE(r.provenance.found) << r.provenance.detail;
  EXPECT_EQ(r.provenance.op, "group_norm");
  EXPECT_EQ(r.provenance.cause, "fault");
  EXPECT_NE(r.provenance.detail.find("groupnorm-f16-accum"), std::string::npos)
      << r.provenance.detail;
}

TEST(HarnessRun, NonFiniteInputIsNamedAsTheOrigin) {
  const std::string path = ::testing::TempDir() + "nan_latent.npy";
  Tensor z(DType::kF32, {1, 4, 16, 16});
  for (int64_t i = 0; i < z.numel(); ++i) z.data<float>()[i] = float(std::sin(double(i)));
  z.data<float>()[3 * 256 + 5 * 16 + 7] = NAN;
  ASSERT_TRUE(write_npy(path, z).ok());
  const CaseResult r = run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 input=" + path);
  // Neither path is to blame: the case is an input error, and the origin is the input element.
  EXPECT_EQ(r.outcome, Outcome::kError);
  EXPECT_NE(r.reason.find("fix the input"), std::string::npos) << r.reason;
  ASSERT_TRUE(r.provenance.found);
  EXPECT_EQ(r.provenance.cause, "propagated-from-input");
  EXPECT_EQ(r.provenance.index, (std::vector<int64_t>{0, 3, 5, 7}));
  EXPECT_TRUE(std::isnan(r.provenance.value));
}

TEST(HarnessRun, PrecisionSearchSaysWhenPrecisionIsNotTheProblem) {
  RunOptions search;
  search.search = true;
  const CaseResult r = run(
      "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 inject=upsample-off-by-one", search);
  ASSERT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_TRUE(r.keep_fp32.empty());
  EXPECT_NE(r.search_note.find("still fails"), std::string::npos) << r.search_note;
}

// The reference's own fp32 noise (against fp64), op by op through a whole decoder, sits far below
// every low-precision tolerance: what the table is calibrated against.
TEST(HarnessRun, ReferenceNoiseFloorIsBelowTheTolerances) {
  ModelCache models;
  for (const char* name : {"tiny-kl", "tiny-taesd"}) {
    const Model& m = **models.get(name);
    const Graph g = build_decoder_graph(vae_config(m));
    Tensor z(DType::kF32, {1, vae_config(m).latent_channels(), 16, 16});
    for (int64_t i = 0; i < z.numel(); ++i)
      z.data<float>()[i] = float(std::cos(double(i) * 0.71) * 1.5);
    std::map<int, Tensor> f32, f64;
    ASSERT_TRUE(ref::run_graph(g, m.weights, {{"latents", z}}, DType::kF32,
                               [&](const Op& op, const Tensor& v) { f32[op.output] = v; })
                    .ok());
    ASSERT_TRUE(ref::run_graph(g, m.weights, {{"latents", z}}, DType::kF64,
                               [&](const Op& op, const Tensor& v) { f64[op.output] = v; })
                    .ok());
    double worst = 0;
    for (const auto& [v, t] : f32)
      worst = std::max(worst, compare_tensors(t, f64.at(v), DType::kF32)->rel_l2);
    // Accumulated through the whole decoder, so against the tightest low-precision local bound.
    const ValuePath f16{{DType::kF16}, DType::kF32, 1, DType::kF32};
    EXPECT_LT(worst * kNoiseFloorMargin, local_tolerance(OpClass::kConv, f16).rel_l2) << name;
    RecordProperty(std::string("noise_floor_") + name, std::to_string(worst));
    std::printf("%s decoder: max op-output rel L2 fp32 vs fp64 = %.3g\n", name, worst);
  }
}

// The output rule: every group's u in quadrature, each times its factor: 2 where the error is
// passed on (a VAE's groups, the scheduler's), 0.6 where the blocks after it damp it (a UNet's).
TEST(Tolerance, DampedGroupsCountWithTheirOwnFactor) {
  ValuePath passed{{DType::kF16}, DType::kF32, 1, DType::kF32};
  ValuePath damped = passed;
  damped.damped = true;
  const double e = unit_roundoff(DType::kF16) + 2 * unit_roundoff(DType::kF32);  // u + sqrt(1) sum
  EXPECT_NEAR(output_tolerance({passed}).rel_l2, 2 * e, 1e-15);
  EXPECT_NEAR(output_tolerance({damped}).rel_l2, 0.6 * e, 1e-15);
  const Tolerance both = output_tolerance({passed, damped, damped});
  EXPECT_NEAR(both.rel_l2, std::sqrt(4 * e * e + 2 * 0.36 * e * e), 1e-15);
  EXPECT_NE(both.basis.find("2 damped x 0.6"), std::string::npos) << both.basis;
}

// ReLU is 1-Lipschitz: its output's error is at most its input's, measured against the few
// values above zero. The local bound grows by ||x|| / ||relu(x)||.
TEST(Tolerance, ReluConditioningScalesTheLocalBound) {
  Tensor x(DType::kF32, {1, 1, 2, 2});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = float(std::vector<double>{3, -4, 0, -12}[i]);
  EXPECT_NEAR(relu_conditioning(x), 13.0 / 3.0, 1e-12);
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = -1;
  EXPECT_EQ(relu_conditioning(x), 1);  // nothing above zero: no measure
  ValuePath path{{DType::kF16}, DType::kF32, 36, DType::kF32};
  const Tolerance plain = local_tolerance(OpClass::kConv, path);
  path.relu_conditioning = 10;
  const Tolerance relu = local_tolerance(OpClass::kConv, path);
  EXPECT_NEAR(relu.rel_l2, 10 * plain.rel_l2, 1e-15);
  EXPECT_NE(relu.basis.find("x ReLU conditioning 10"), std::string::npos) << relu.basis;
}

// A drawn AutoencoderTiny of width 4 whose encoder.layers.6 conv leaves almost every value below
// zero: its fused ReLU's output is a few small values, and a correct f16 group's error against
// them was 5x the bound before the ReLU's conditioning counted (384 there).
TEST(HarnessRun, AReluThatZeroesMostValuesIsJudgedOnItsInput) {
  const CaseResult r =
      run("vae.encode model=random:autoencoder_tiny:40 res=32x32 w=f16 a=f16 acc=f32");
  ASSERT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  const CheckpointRecord* relu = record(r, "encoder.layers.6.conv.1");
  ASSERT_TRUE(relu);
  EXPECT_NE(relu->tolerance_basis.find("ReLU conditioning"), std::string::npos)
      << relu->tolerance_basis;
  EXPECT_GT(relu->local.rel_l2,
            local_tolerance(OpClass::kConv, {{DType::kF16}, DType::kF32, 36, DType::kF32}).rel_l2);
}

// An attention group's longest sum is its softmax row (the tokens), though the attention op's
// input lives only inside the fused group and is never captured: at 128x128 tiny-kl's mid-block
// runs 32x32 = 1024 tokens (its decoder upscales 4x) over 32 channels. (With K = 32, the channel
// count of to_q, a correct fp32 roundtrip at 512x512 failed its attention's local bound.)
TEST(HarnessRun, AttentionTolerancesCountTheTokenSum) {
  const CaseResult r = run("vae.decode model=tiny-kl res=128x128 w=f32 a=f32 acc=f32");
  ASSERT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  const CheckpointRecord* attention = record(r, "decoder.mid_block.attentions.0");
  ASSERT_TRUE(attention);
  EXPECT_NE(attention->tolerance_basis.find("K=1024"), std::string::npos)
      << attention->tolerance_basis;
}

// The memory estimate a case is refused by, against the peak resident memory of the same case
// run by the binary: within a factor of 1.5 either way (docs/design.md, "Memory budget", has
// the measurements over more pipelines). The contract check's fp64 LibTorch runs count where
// the binary has them.
TEST(MemoryBudget, TheEstimateIsWithinAFactorOfTheMeasuredPeak) {
  ModelCache models;
  for (const std::string line : {"vae.decode model=tiny-kl res=256x256 w=f16 a=f16 acc=f32",
                                 "vae.roundtrip model=tiny-kl res=192x192 w=bf16 a=bf16 acc=f32",
                                 "unet.step model=tiny-unet-xl res=384x384 w=f16 a=f16 acc=f32"}) {
    Outcome refusal;
    auto p = prepare_case(case_of(line), RunOptions{}, models, refusal);
    ASSERT_TRUE(p.ok()) << p.error().message();
    auto estimate = estimate_case_memory(*p, TWINPATH_TEST_HAVE_TORCH);
    ASSERT_TRUE(estimate.ok()) << estimate.error().message();
    const std::string report = ::testing::TempDir() + "memory.h5";
    const testing::MeasuredResult r =
        testing::twinpath_measured("run --case '" + line + "' --report " + report);
    ASSERT_EQ(r.code, 0) << r.output;
    const double ratio = double(estimate->bytes) / double(r.peak_bytes);
    EXPECT_GT(ratio, 1 / 1.5) << line << ": estimated " << estimate->text() << ", measured "
                              << format_bytes(r.peak_bytes);
    EXPECT_LT(ratio, 1.5) << line << ": estimated " << estimate->text() << ", measured "
                          << format_bytes(r.peak_bytes);
    RecordProperty(line, std::to_string(ratio));
  }
}

// A video's [B, C, T, H, W] input is scaled to the case's size like an image's: twice the width
// holds about twice the values (the estimate records the pipeline at 64 latent pixels a side).
// tiny-wan with RoPE tables long enough for 256 latent pixels.
TEST(MemoryBudget, TheEstimateScalesAFiveAxisInputToTheCaseSize) {
  const std::string dir = ::testing::TempDir() + "wide_wan_" + std::to_string(::getpid());
  const std::string config = dir + ".json";
  std::ofstream(config) << R"({"_class_name": "WanTransformer3DModel", "attention_head_dim": 16,
    "ffn_dim": 64, "freq_dim": 32, "in_channels": 16, "num_attention_heads": 2, "num_layers": 1,
    "out_channels": 16, "patch_size": [1, 2, 2], "rope_max_seq_len": 256, "text_dim": 32})";
  ASSERT_TRUE(init_model(config, 0, dir).ok());
  ModelCache models;
  int64_t held[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const std::string line = "wan.step model=" + dir + " res=512x" + std::to_string(1024 << i) +
                             " w=bf16 a=bf16 acc=f32 frames=1";
    Outcome refusal;
    auto p = prepare_case(case_of(line), RunOptions{}, models, refusal);
    ASSERT_TRUE(p.ok()) << p.error().message();
    auto estimate = estimate_case_memory(*p, false);
    ASSERT_TRUE(estimate.ok()) << estimate.error().message();
    held[i] = estimate->held;
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove(config);
  const double ratio = double(held[1]) / double(held[0]);
  EXPECT_GT(ratio, 1.8) << held[0] << " and " << held[1] << " bytes held";
  EXPECT_LT(ratio, 2.1) << held[0] << " and " << held[1] << " bytes held";
}

// `triage --activations` holds itself to the same budget: refused before reading the dump's
// activations past --mem, and its estimate within a factor of 1.5 of the binary's measured peak
// on a dump diffusers made (tests/fixtures/activations).
TEST(MemoryBudget, ADumpTriageIsRefusedPastItsBudgetAndEstimatedWithinAFactor) {
  const std::string fx = std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/activations/";
  const std::string dir = ::testing::TempDir() + "dump_model_" + std::to_string(::getpid());
  ASSERT_TRUE(init_model(fx + "kl-small.json", 3, dir).ok());
  auto model = load_model(dir);
  ASSERT_TRUE(model.ok()) << model.error().message();
  const std::string dump = fx + "kl-f32.safetensors";
  auto refused = triage_activations(dump, *model, int64_t(1) << 20);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("over the memory budget of 1.00 MiB (--mem): refused "
                                           "before reading its activations"),
            std::string::npos)
      << refused.error().message();
  auto t = triage_activations(dump, *model);
  ASSERT_TRUE(t.ok()) << t.error().message();
  const testing::MeasuredResult r =
      testing::twinpath_measured("triage --activations " + dump + " --model " + dir);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.code, 0) << r.output;
  // A dump this small is mostly the process, whose 416 MiB the estimate measured with LibTorch
  // loaded; a build without it (the sanitize preset) peaks near 80 MiB here.
  if (TWINPATH_TEST_HAVE_TORCH) {
    const double ratio = double(t->estimated_bytes) / double(r.peak_bytes);
    EXPECT_GT(ratio, 1 / 1.5) << format_bytes(t->estimated_bytes) << " against "
                              << format_bytes(r.peak_bytes);
    EXPECT_LT(ratio, 1.5) << format_bytes(t->estimated_bytes) << " against "
                          << format_bytes(r.peak_bytes);
    RecordProperty("triage", std::to_string(ratio));
  }
}

// One VAE serving both pipelines in one session, calls interleaved: each call's bits equal the
// same call in a session of its own, for KL and Tiny.
TEST(HarnessRun, InterleavedEncodeAndDecodeCallsEqualIsolatedCalls) {
  for (const char* line :
       {"vae.roundtrip model=tiny-kl res=48x80 w=f16 a=f16 acc=f32 interleave=on",
        "vae.roundtrip model=tiny-taesd res=64x64 w=bf16 a=bf16 acc=f32 interleave=on"}) {
    const CaseResult r = run(line);
    EXPECT_EQ(r.outcome, Outcome::kPassed) << line << ": " << r.reason;
  }
}

// Field report 5: one session serving changing sizes. Buckets compile fewer plans than exact
// shapes and give the same outputs; under mem=2MiB the 256x256 step (10 MiB of arenas) is
// refused before allocating, with the figure, and the next step still runs.
TEST(HarnessRun, StreamCountsCompilationsAndRefusesWhatCannotFit) {
  const CaseResult r =
      run("vae.decode model=tiny-kl stream=64x64+64x72+72x80+80x80+64x64+96x96+256x256+64x80 "
          "w=f16 a=f16 acc=f32 shapes=bucket:32 mem=2MiB");
  ASSERT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  ASSERT_EQ(r.stream.size(), 8u);
  const StreamStep& big = r.stream[6];
  EXPECT_TRUE(big.refused);
  EXPECT_EQ(big.need_bytes, 10 << 20);
  EXPECT_NE(big.note.find("needs 10.00 MiB"), std::string::npos) << big.note;
  for (const StreamStep& s : r.stream) {
    EXPECT_LE(s.peak_arena_bytes, 2 << 20) << s.resolution;
    if (!s.refused) {
      EXPECT_EQ(s.bucket_vs_exact_max_abs, 0.0) << s.resolution << ": " << s.note;
    }
  }
  EXPECT_FALSE(r.stream[7].refused);
  EXPECT_EQ(r.stream[4].compilations, 0) << "64x64 again is a cache hit";
  EXPECT_LT(r.stream.back().total_compilations, r.stream.back().exact_compilations);
  EXPECT_NE(record(r, "output:sample@96x96"), nullptr);
  // Exact shapes under the same budget: each size compiles, idle arenas are evicted to fit.
  const CaseResult exact = run(
      "vae.decode model=tiny-kl stream=64x64+64x72+72x80+80x80+96x96 w=f16 a=f16 acc=f32 mem=2MiB");
  ASSERT_EQ(exact.outcome, Outcome::kPassed) << exact.reason;
  EXPECT_EQ(exact.stream.back().total_compilations, 5);
  EXPECT_GT(exact.stream.back().evictions, 0);
  // A size that fits nowhere under a budget the first step already exceeds: every step refused.
  const CaseResult none =
      run("vae.decode model=tiny-kl stream=64x64+96x96 w=f16 a=f16 acc=f32 mem=64KiB");
  EXPECT_EQ(none.outcome, Outcome::kPassed) << none.reason;
  for (const StreamStep& s : none.stream) EXPECT_TRUE(s.refused) << s.resolution;
}

// A tiled case checks the compiled engage decision against the config's rule: with the
// threshold taken from the stride (field report 4), a 7-latent-wide input that fits the 8-latent
// tile is tiled, and the case says so; clean, seams and interiors are measured apart.
TEST(HarnessRun, TilingEngageDecisionIsCheckedAgainstTheConfigRule) {
  const CaseResult bad =
      run("vae.decode model=tiny-kl res=32x28 w=f16 a=f16 acc=f32 tiling=on "
          "inject=tile-threshold-from-stride");
  ASSERT_EQ(bad.outcome, Outcome::kFailed);
  EXPECT_NE(
      bad.reason.find(
          "tiling: the compiled path tiled the decode input [1, 4, 8, 7], but the config's rule"),
      std::string::npos)
      << bad.reason;
  const CaseResult clean = run("vae.decode model=tiny-kl res=32x36 w=f16 a=f16 acc=f32 tiling=on");
  ASSERT_EQ(clean.outcome, Outcome::kPassed) << clean.reason;
  const CheckpointRecord* seam = record(clean, "seam:sample");
  const CheckpointRecord* interior = record(clean, "interior:sample");
  ASSERT_TRUE(seam && interior);
  EXPECT_EQ(seam->accumulated.count + interior->accumulated.count, 3 * 32 * 36);
  EXPECT_GT(seam->accumulated.rel_l2, 0.0);
}

// Blend bands from the geometry: tiny-kl decode, latents 8x9 (tiles of 8 every 6, 8 px blends,
// crops of 24 px): the second tile row and column start at pixel 24 and blend over 8 pixels.
TEST(HarnessRun, SeamBandsFollowTheTileGrid) {
  ModelCache models;
  const auto model = *models.get("tiny-kl");
  const TileGeometry g = *tile_geometry(vae_config(*model), TilingOptions{true, 0, 0});
  const SeamBands b = seam_bands(g, Pipeline::kDecode, {1, 4, 8, 9});
  ASSERT_EQ(b.rows.size(), 32u);
  ASSERT_EQ(b.cols.size(), 36u);
  for (int64_t y = 0; y < 32; ++y) EXPECT_EQ(b.rows[std::size_t(y)], y >= 24) << y;
  for (int64_t x = 0; x < 36; ++x) EXPECT_EQ(b.cols[std::size_t(x)], x >= 24 && x < 32) << x;
  const SeamBands none = seam_bands(g, Pipeline::kDecode, {1, 4, 8, 8});
  for (bool v : none.rows) EXPECT_FALSE(v);
}

// input=image: a picture in [-1, 1] with saturated flat regions, the same for the same seed.
TEST(HarnessRun, ProceduralImagesLookLikePictures) {
  const Tensor a = procedural_image(7, 3, 64, 80), b = procedural_image(7, 3, 64, 80),
               c = procedural_image(8, 3, 64, 80);
  ASSERT_EQ(a.shape(), (Shape{1, 3, 64, 80}));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.raw(), c.raw(), a.nbytes()), 0);
  int64_t saturated = 0, edges = 0;
  const float* d = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_TRUE(d[i] >= -1.0f && d[i] <= 1.0f) << i;
    saturated += std::abs(d[i]) > 0.95f;
    if (i % 80 != 79) edges += std::abs(d[i + 1] - d[i]) > 0.5f;
  }
  EXPECT_GT(saturated, a.numel() / 20);
  EXPECT_GT(edges, 20);
  const CaseResult r = run("vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 input=image");
  EXPECT_EQ(r.outcome, Outcome::kPassed) << r.reason;
}

}  // namespace
}  // namespace tp
