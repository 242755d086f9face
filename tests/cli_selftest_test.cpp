// `twinpath selftest`: on a machine without a CUDA device (CI's) it says so in one sentence and
// exits 2, writing nothing; its suite parses into cases on every family. (On a GPU machine
// tools/gpu-run.sh runs it.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "compiled/device.h"
#include "tests/support/command.h"
#include "tests/support/user_error.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::expect_user_error;
using testing::twinpath;

TEST(CliSelftest, WithoutACudaDeviceSaysSoAndExits2) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  const fs::path out = fs::temp_directory_path() / ("tp_selftest_" + std::to_string(::getpid()));
  expect_user_error("selftest --device cuda --out " + out.string(),
                    "no CUDA device is visible to this process");
  EXPECT_FALSE(fs::exists(out)) << "a refused selftest left files";
  expect_user_error("selftest --device cpu", "give --device cuda");
}

TEST(CliSelftest, ItsSuiteCoversEveryFamilyAndBothKernelSets) {
  const testing::CommandResult r = twinpath("cases list --suite selftest");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* part : {"vae.decode model=tiny-kl", "model=tiny-taesd", "unet.step",
                           "sdxl.denoise", "wan.step", "wan.denoise", "video.decode",
                           "kernels=per-op", "kernels=fused", "graphs=off", "reload=on"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
}

}  // namespace
}  // namespace tp
