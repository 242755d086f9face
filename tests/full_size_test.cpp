// Full-size models through the binary (label `slow`): sdxl-kl init and a 1x4x32x32 decode.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "harness/safetensors.h"
#include "harness/tensor_io.h"

namespace tp {
namespace {

TEST(FullSize, SdxlKlInitAndDecode) {
  const auto dir = std::filesystem::temp_directory_path() / ("tp_full_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string bin = TWINPATH_BINARY, m = (dir / "m").string();
  ASSERT_EQ(std::system((bin + " model init --config sdxl-kl --out " + m + " > /dev/null").c_str()), 0);
  Tensor latent(DType::kF32, {1, 4, 32, 32});
  for (int64_t i = 0; i < latent.numel(); ++i) latent.data<float>()[i] = std::sin(0.37f * float(i));
  const std::string in = (dir / "latent.safetensors").string(), out = (dir / "out.safetensors").string();
  ASSERT_TRUE(write_tensor_file(in, {{"latents", latent}}).ok());
  ASSERT_EQ(std::system((bin + " exec --model " + m + " --pipeline vae.decode --path reference --input " + in +
                         " --output " + out).c_str()), 0);
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

}  // namespace
}  // namespace tp
