// The CUDA kernels of the N-dimensional ops against the CPU emulation, on the denoisers' plans
// (the UNet's and Wan's transformer) and HunyuanVideo's VAE (label `gpu`; every test skips where
// no CUDA device is visible):
//  - group by group: each fused group (attention with its norm, projections and residual; GEGLU;
//    convs and GroupNorms on channels-last copies; the timestep sinusoid, concat, resize) runs
//    alone on both backends, fed the emulation's stored values; its outputs must agree within a
//    few units in the last place of their storage dtype;
//  - a 3-step `sdxl.denoise` or `wan.denoise` with classifier-free guidance (the scheduler's
//    graphs too): as
//    accurate as the emulation against the fp32 reference, the same bits run after run
//    (tests/support/device_pipeline.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

#include "compiled/device.h"
#include "compiled/session.h"
#include "harness/models/family.h"
#include "harness/models/model.h"
#include "reference/executor.h"
#include "tests/support/compare.h"
#include "tests/support/device_pipeline.h"
#include "tests/support/group_match.h"
#include "tests/support/test_name.h"

namespace tp {
namespace {

using compiled::Session;
using compiled::SessionOptions;

struct UnetGpuCase {
  const char* model;  // a built-in denoiser, seeded weights
  const char* policy;
  const char* pipeline;            // a loop (3 steps, CFG), or the one call for UNets without one
  const char* step = "unet.step";  // the one call, whose graph is the family's first
};

std::ostream& operator<<(std::ostream& os, const UnetGpuCase& c) {
  return os << c.model << " " << c.policy;
}

// Configs beyond the built-ins. hv-wide-head: a HunyuanVideo VAE whose mid-block attention is
// one head 288 wide, past the masked row kernel's 256 (kMaxHeadDim), so that hunyuan-video's
// frame-causal attention through the GEMMs (its head is 512 wide) runs at a tiny size.
const std::map<std::string, std::string> kTestConfigs = {
    {"hv-wide-head", R"({"_class_name": "AutoencoderKLHunyuanVideo", "act_fn": "silu",
 "block_out_channels": [8, 8, 16, 288], "in_channels": 3, "latent_channels": 4,
 "layers_per_block": 1, "mid_block_add_attention": true, "norm_num_groups": 4, "out_channels": 3,
 "scaling_factor": 0.476986, "spatial_compression_ratio": 8, "temporal_compression_ratio": 4})"}};

// A built-in or one of kTestConfigs, seeded weights.
const Model& builtin_model(const std::string& name) {
  static std::map<std::string, Model> models;
  auto it = models.find(name);
  if (it != models.end()) return it->second;
  const auto dir =
      std::filesystem::temp_directory_path() / ("tp_gpu_" + name + std::to_string(::getpid()));
  std::string config = name;
  if (auto text = kTestConfigs.find(name); text != kTestConfigs.end()) {
    std::filesystem::create_directories(dir.string() + "-config");
    config = dir.string() + "-config/config.json";
    std::ofstream(config) << text->second;
  }
  if (!init_model(config, 1, dir.string()).ok()) throw std::runtime_error(name + " init failed");
  auto m = load_model(dir.string());
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dir.string() + "-config");
  if (!m.ok()) throw std::runtime_error(m.error().message());
  return models[name] = std::move(m).value();
}

// Seeded inputs of `pipeline` at 64x80 pixels (latents 8x10: not square, so rows and columns
// cannot be swapped unnoticed), bound and named as the graphs take them.
NamedTensors inputs_for(const Model& m, const std::string& pipeline) {
  InputRequest r;
  r.pipeline = pipeline;
  r.height = 64;
  r.width = 80;
  r.seed = 11;
  auto in = m.family().generate_inputs(m, r, {});
  if (!in.ok()) throw std::runtime_error(in.error().message());
  auto bound = m.family().bind_inputs(m, pipeline, *in);
  if (!bound.ok()) throw std::runtime_error(bound.error().message());
  // A single-input pipeline's generated input is "input": named as its graph reads it.
  if (bound->size() == 1) bound->front().first = m.family().pipeline(pipeline)->inputs.front();
  return *bound;
}

class GpuUnetTest : public ::testing::TestWithParam<UnetGpuCase> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  }
  static SessionOptions options() {
    SessionOptions o;
    o.policy.base = compiled::parse_layer_policy(GetParam().policy).value();
    return o;
  }
  static std::unique_ptr<compiled::Backend> cuda() {
    auto b = compiled::make_cuda_backend();
    if (!b.ok()) throw std::runtime_error(b.error().message());
    return std::move(b).value();
  }
};

TEST_P(GpuUnetTest, EveryGroupMatchesTheEmulationOnTheSameInputs) {
  const Model& m = builtin_model(GetParam().model);
  Session emulated(options()), device(options(), cuda());
  testing::expect_every_group_matches(m.family().graphs(*m.config).at(0), m.weights,
                                      inputs_for(m, GetParam().step), emulated, device,
                                      GetParam().step);
}

TEST_P(GpuUnetTest, PipelineIsAsAccurateAsTheEmulation) {
  const Model& m = builtin_model(GetParam().model);
  const std::string pipeline = GetParam().pipeline;
  const NamedTensors inputs = inputs_for(m, pipeline);
  PipelineOptions loop;
  loop.values = {{"steps", "3"}, {"guidance", "5"}};
  FunctionExecutor reference([](const Graph& g, const Weights& w, const NamedTensors& in) {
    return ref::run_graph(g, w, in, DType::kF32);
  });
  Session emulated(options()), device(options(), cuda());
  auto want = m.family().run(m, pipeline, inputs, reference, loop);
  auto emu = m.family().run(m, pipeline, inputs, emulated, loop);
  auto got = m.family().run(m, pipeline, inputs, device, loop);
  auto again = m.family().run(m, pipeline, inputs, device, loop);
  for (const auto* r : {&want, &emu, &got, &again}) ASSERT_TRUE(r->ok()) << r->error().message();
  testing::expect_device_as_accurate_as_emulation(
      {*want, *emu, *got, *again}, pipeline,
      [&](const std::string& key, const char* figure) { RecordProperty(key, figure); });
}

INSTANTIATE_TEST_SUITE_P(
    Policies, GpuUnetTest,
    ::testing::Values(
        UnetGpuCase{"tiny-unet-xl", "w=f16,a=f16,acc=f32", "sdxl.denoise"},
        UnetGpuCase{"tiny-unet-xl", "w=bf16,a=bf16,acc=f32", "sdxl.denoise"},
        UnetGpuCase{"tiny-unet-xl", "w=f8e4m3,a=bf16,acc=f32", "sdxl.denoise"},
        UnetGpuCase{"tiny-unet", "w=f16,a=f16,acc=f32", "unet.step"},
        UnetGpuCase{"tiny-wan", "w=bf16,a=bf16,acc=f32", "wan.denoise", "wan.step"},
        UnetGpuCase{"tiny-wan", "w=f16,a=f16,acc=f32", "wan.denoise", "wan.step"},
        UnetGpuCase{"tiny-wan", "w=bf16,a=bf16,acc=f32,attn=act", "wan.denoise", "wan.step"},
        // HunyuanVideo's VAE: its encoder group by group (causal 3-D convs,
        // frame-causal attention), and a roundtrip of 5 frames.
        UnetGpuCase{"tiny-hv", "w=f16,a=f16,acc=f32", "video.roundtrip", "video.encode"},
        UnetGpuCase{"tiny-hv", "w=bf16,a=bf16,acc=f32", "video.roundtrip", "video.encode"},
        // Mid-block attention through the GEMMs: the encoder's group by group, both in the
        // roundtrip.
        UnetGpuCase{"hv-wide-head", "w=f16,a=f16,acc=f32", "video.roundtrip", "video.encode"}),
    [](const ::testing::TestParamInfo<UnetGpuCase>& info) {
      return testing::test_name(std::string(info.param.model) + "_" + info.param.policy);
    });

}  // namespace
}  // namespace tp
