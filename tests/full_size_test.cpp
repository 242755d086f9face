// Full-size models (label `slow`): sdxl-kl init and a 1x4x32x32 decode through the binary, and
// the compiled path's emulation on sd-kl against the fp32 reference (the bars).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "compiled/describe_session.h"
#include "harness/core/rng.h"
#include "harness/core/safetensors.h"
#include "harness/core/tensor_io.h"
#include "harness/models/model.h"
#include "harness/models/vae/pipeline.h"
#include "reference/executor.h"
#include "tests/support/compare.h"

namespace tp {
namespace {

TEST(FullSize, SdxlKlInitAndDecode) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tp_full_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string bin = TWINPATH_BINARY, m = (dir / "m").string();
  ASSERT_EQ(std::system((bin + " model init --config sdxl-kl --out " + m + " > /dev/null").c_str()),
            0);
  Tensor latent(DType::kF32, {1, 4, 32, 32});
  for (int64_t i = 0; i < latent.numel(); ++i) latent.data<float>()[i] = std::sin(0.37f * float(i));
  const std::string in = (dir / "latent.safetensors").string(),
                    out = (dir / "out.safetensors").string();
  ASSERT_TRUE(write_tensor_file(in, {{"latents", latent}}).ok());
  ASSERT_EQ(
      std::system((bin + " exec --model " + m + " --pipeline vae.decode --path reference --input " +
                   in + " --output " + out)
                      .c_str()),
      0);
  auto f = SafetensorsFile::open(out);
  ASSERT_TRUE(f.ok()) << f.error().message();
  auto sample = f->read("sample");
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(sample->shape(), (Shape{1, 3, 256, 256}));
  double sum_sq = 0;
  for (int64_t i = 0; i < sample->numel(); ++i) {
    const float v = sample->data<float>()[i];
    ASSERT_TRUE(std::isfinite(v)) << "element " << i;
    sum_sq += double(v) * v;
  }
  EXPECT_GT(sum_sq, 0.0) << "all-zero output";
  std::filesystem::remove_all(dir);
}

// sd-kl (seeded random weights) encode at 64x64 and decode of an 8x8 latent: f16 storage within
// 5e-3 relative L2 of the fp32 reference, bf16 within 3e-2; fp8 weights run and are measured.
TEST(FullSize, SdKlCompiledEmulationAgainstReference) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tp_sdkl_" + std::to_string(::getpid()));
  ASSERT_TRUE(init_model("sd-kl", 1, dir.string()).ok());
  auto model = load_model(dir.string());
  ASSERT_TRUE(model.ok()) << model.error().message();
  std::filesystem::remove_all(dir);
  auto random = [](Shape shape, const char* stream, double scale) {
    Tensor t(DType::kF32, shape);
    Rng rng(1, stream);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform(-scale, scale));
    return t;
  };
  const GraphRunner reference = [](const Graph& g, const Weights& w, const NamedTensors& in) {
    return ref::run_graph(g, w, in, DType::kF32);
  };
  for (auto [pipeline, input] : {std::pair{Pipeline::kEncode, random({1, 3, 64, 64}, "image", 1)},
                                 std::pair{Pipeline::kDecode, random({1, 4, 8, 8}, "latent", 2)}}) {
    auto want = run_pipeline(model.value(), pipeline, input, reference);
    ASSERT_TRUE(want.ok()) << want.error().message();
    for (auto [policy, bar] : {std::pair{"w=f16,a=f16,acc=f32", 5e-3},
                               {"w=bf16,a=bf16,acc=f32", 3e-2},
                               {"w=f8e4m3,a=bf16,acc=f32", 1.0}}) {
      compiled::SessionOptions o;
      o.policy.base = compiled::parse_layer_policy(policy).value();
      compiled::Session session(o);
      auto got = run_pipeline(model.value(), pipeline, input, session);
      ASSERT_TRUE(got.ok()) << got.error().message();
      for (const auto& [name, t] : got.value()) {
        const double err = testing::relative_l2(t, *find_tensor(want.value(), name));
        EXPECT_LE(err, bar) << pipeline_name(pipeline) << " " << name << " " << policy;
        char figure[32];
        std::snprintf(figure, sizeof figure, "%.3e", err);
        ::testing::Test::RecordProperty(
            std::string(pipeline_name(pipeline)) + "." + name + " " + policy, figure);
      }
    }
  }
}

}  // namespace
}  // namespace tp
