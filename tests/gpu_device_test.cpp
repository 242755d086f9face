// GPU tier: runs for real where a CUDA device is present, skips cleanly where none is.
#include <gtest/gtest.h>

#include "compiled/device.h"

namespace tp {
namespace {

TEST(GpuDevice, DescribesTheDevice) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  const std::string d = cuda_device_description(0);
  EXPECT_NE(d.find("sm_"), std::string::npos) << d;
}

}  // namespace
}  // namespace tp
