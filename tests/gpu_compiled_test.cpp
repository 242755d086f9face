// The CUDA kernels against the CPU emulation, on the same plan and the same inputs (label
// `gpu`; every test skips where no CUDA device is visible).
//  - Group by group: each group runs alone on both backends, fed the emulation's stored values
//    for its inputs; its outputs must agree within a few units in the last place of their
//    storage dtype (the kernels differ from the emulation only in summation order).
//  - Whole pipelines (encode, decode, roundtrip with the decoder reading the encoder's latents
//    in device memory): as accurate as the emulation against the fp32 reference, and the same
//    bits run after run (tests/support/device_pipeline.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <vector>

#include "compiled/describe_session.h"
#include "compiled/device.h"
#include "harness/core/compare.h"
#include "harness/core/rng.h"
#include "harness/models/vae/pipeline.h"
#include "harness/models/vae/vae_graphs.h"
#include "reference/executor.h"
#include "tests/support/compare.h"
#include "tests/support/device_pipeline.h"
#include "tests/support/fixtures.h"
#include "tests/support/group_match.h"
#include "tests/support/test_name.h"

namespace tp {
namespace {

using compiled::Session;
using compiled::SessionOptions;

struct GpuCase {
  const char* model;  // "tiny-kl" (committed fixture) or "sd-kl" (seeded random weights)
  const char* policy;
  compiled::CudaKernels kernels = compiled::CudaKernels::kPerOp;
};

std::ostream& operator<<(std::ostream& os, const GpuCase& c) {
  return os << c.model << " " << c.policy << " " << compiled::cuda_kernels_name(c.kernels);
}

const Model& model_for(const std::string& name) {
  static std::map<std::string, Model> models;
  auto it = models.find(name);
  if (it != models.end()) return it->second;
  if (name != "sd-kl") return models[name] = testing::fixture_model(name);
  const auto dir =
      std::filesystem::temp_directory_path() / ("tp_gpu_sdkl_" + std::to_string(::getpid()));
  if (!init_model("sd-kl", 1, dir.string()).ok()) throw std::runtime_error("sd-kl init failed");
  auto m = load_model(dir.string());
  std::filesystem::remove_all(dir);
  if (!m.ok()) throw std::runtime_error(m.error().message());
  return models[name] = std::move(m).value();
}

Tensor random_input(Shape shape, const std::string& stream, double scale) {
  Tensor t(DType::kF32, shape);
  Rng rng(7, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform(-scale, scale));
  return t;
}

class GpuCompiledTest : public ::testing::TestWithParam<GpuCase> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
  static SessionOptions options(const char* policy) {
    SessionOptions o;
    o.policy.base = compiled::parse_layer_policy(policy).value();
    return o;
  }
  static std::unique_ptr<compiled::Backend> cuda() {
    auto b = compiled::make_cuda_backend(GetParam().kernels);
    if (!b.ok()) throw std::runtime_error(b.error().message());
    return std::move(b).value();
  }
  // Images of 64x64 (sd-kl) or 32x32, and latents of the matching size: small enough for the
  // emulation, non-square so rows and columns cannot be swapped unnoticed.
  static Tensor input_for(const Model& m, Pipeline p) {
    const int64_t h = std::string(GetParam().model) == "sd-kl" ? 64 : 32,
                  w = h + 2 * vae_config(m).downscale();
    if (p == Pipeline::kDecode)
      return random_input({1, vae_config(m).latent_channels(), h / vae_config(m).downscale(),
                           w / vae_config(m).downscale()},
                          "latent", 2);
    return random_input({1, vae_config(m).image_channels(), h, w}, "image", 1);
  }
};

TEST_P(GpuCompiledTest, EveryGroupMatchesTheEmulationOnTheSameInputs) {
  const Model& m = model_for(GetParam().model);
  for (Pipeline p : {Pipeline::kEncode, Pipeline::kDecode}) {
    const Graph graph = p == Pipeline::kEncode ? build_encoder_graph(vae_config(m))
                                               : build_decoder_graph(vae_config(m));
    const Tensor input = input_for(m, p);
    Session emulated(options(GetParam().policy)), device(options(GetParam().policy), cuda());
    testing::expect_every_group_matches(graph, m.weights, {{graph.inputs[0].first, input}},
                                        emulated, device, pipeline_name(p));
  }
}

TEST_P(GpuCompiledTest, PipelinesAreAsAccurateAsTheEmulation) {
  const Model& m = model_for(GetParam().model);
  const GraphRunner reference = [](const Graph& g, const Weights& w, const NamedTensors& in) {
    return ref::run_graph(g, w, in, DType::kF32);
  };
  for (Pipeline p : {Pipeline::kEncode, Pipeline::kDecode, Pipeline::kRoundtrip}) {
    const Tensor input = input_for(m, p);
    Session emulated(options(GetParam().policy)), device(options(GetParam().policy), cuda());
    auto want = run_pipeline(m, p, input, reference);
    auto emu = run_pipeline(m, p, input, emulated);
    auto got = run_pipeline(m, p, input, device);
    auto again = run_pipeline(m, p, input, device);
    for (const auto* r : {&want, &emu, &got, &again}) ASSERT_TRUE(r->ok()) << r->error().message();
    testing::expect_device_as_accurate_as_emulation(
        {*want, *emu, *got, *again}, pipeline_name(p),
        [&](const std::string& key, const char* figure) { RecordProperty(key, figure); });
  }
}

// The fused kernel set must have fused: at least one conv shape of the decode on a cuDNN engine
// (a set that fell back to per-op everywhere would pass the tests above without testing itself).
TEST_P(GpuCompiledTest, FusedKernelsRunTheirConvsOnCudnn) {
  if (GetParam().kernels != compiled::CudaKernels::kFused) GTEST_SKIP() << "per-op kernels";
  const Model& m = model_for(GetParam().model);
  std::unique_ptr<compiled::Backend> backend = cuda();
  const compiled::Backend* device = backend.get();
  Session session(options(GetParam().policy), std::move(backend));
  auto out = run_pipeline(m, Pipeline::kDecode, input_for(m, Pipeline::kDecode), session);
  ASSERT_TRUE(out.ok()) << out.error().message();
  const std::string notes = device->notes();
  RecordProperty("cudnn", notes);
  std::smatch got;
  ASSERT_TRUE(std::regex_search(notes, got, std::regex(": ([0-9]+) conv shapes on engines")))
      << notes;
  if (std::string(GetParam().policy).find("w=f32") == std::string::npos) {
    EXPECT_GT(std::stoi(got[1].str()), 0) << notes;
  }
}

// TWINPATH_CUDA_GRAPHS=1: run 1 is direct, run 2 is captured and launched, run 3 replays; each
// must give the direct backend's bits (the same kernels on the same addresses), the roundtrip's
// decoder reading the encoder's arena through a view. The notes must show plans captured and
// none left direct (a capture that failed would otherwise pass as direct launches).
TEST_P(GpuCompiledTest, CapturedGraphsReplayTheDirectLaunchesBits) {
  const Model& m = model_for(GetParam().model);
  auto graphs = compiled::make_cuda_backend(GetParam().kernels, true);
  ASSERT_TRUE(graphs.ok()) << graphs.error().message();
  const compiled::Backend* replaying = graphs.value().get();
  Session direct(options(GetParam().policy), cuda()),
      captured(options(GetParam().policy), std::move(graphs).value());
  for (Pipeline p : {Pipeline::kDecode, Pipeline::kRoundtrip}) {
    const Tensor input = input_for(m, p);
    auto want = run_pipeline(m, p, input, direct);
    ASSERT_TRUE(want.ok()) << want.error().message();
    for (int run = 1; run <= 3; ++run) {
      auto got = run_pipeline(m, p, input, captured);
      ASSERT_TRUE(got.ok()) << got.error().message();
      ASSERT_EQ(got->size(), want->size());
      for (std::size_t i = 0; i < got->size(); ++i) {
        const Tensor &a = (*got)[i].second, &b = (*want)[i].second;
        ASSERT_EQ(a.nbytes(), b.nbytes());
        EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0)
            << pipeline_name(p) << " run " << run << ": " << (*got)[i].first
            << " differs from the direct launches";
      }
    }
  }
  const std::string notes = replaying->notes();
  RecordProperty("graphs", notes);
  std::smatch got;
  ASSERT_TRUE(std::regex_search(notes, got, std::regex("CUDA graphs: ([0-9]+) plans captured")))
      << notes;
  EXPECT_GE(std::stoi(got[1].str()), 2) << notes;  // the decoder and the encoder at least
  EXPECT_EQ(notes.find(" direct: "), std::string::npos) << notes;
}

const GpuCase kCases[] = {
    {"tiny-kl", "w=f16,a=f16,acc=f32"},
    {"tiny-kl", "w=bf16,a=bf16,acc=f32"},
    {"tiny-kl", "w=f8e4m3,a=bf16,acc=f32"},
    {"tiny-kl", "w=f8e5m2,a=f16,acc=f32,scale=tensor"},
    {"tiny-kl", "w=f32,a=f32,acc=f32"},
    {"sd-kl", "w=f16,a=f16,acc=f32"},
    {"sd-kl", "w=bf16,a=bf16,acc=f32"},
    {"sd-kl", "w=f8e4m3,a=f16,acc=f32"},
    // attn=act: the attention products on tensor cores, q, k, v and P rounded first.
    {"tiny-kl", "w=f16,a=f16,acc=f32,attn=act"},
    {"sd-kl", "w=bf16,a=bf16,acc=f32,attn=act"}};

// Every case on each kernel set.
std::vector<GpuCase> cases() {
  std::vector<GpuCase> all;
  for (compiled::CudaKernels k : {compiled::CudaKernels::kPerOp, compiled::CudaKernels::kFused})
    for (GpuCase c : kCases) {
      c.kernels = k;
      all.push_back(c);
    }
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Policies, GpuCompiledTest, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<GpuCase>& info) {  // e.g. tiny_kl_w_f16_a_f16_acc_f32_fused
      return testing::test_name(std::string(info.param.model) + "_" + info.param.policy + "_" +
                                compiled::cuda_kernels_name(info.param.kernels));
    });

TEST(GpuCompiled, RefusesClearlyWithoutADevice) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto b = compiled::make_cuda_backend();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("compiled:cpu"), std::string::npos) << b.error().message();
}

}  // namespace
}  // namespace tp
