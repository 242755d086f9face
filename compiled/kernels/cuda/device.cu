#include <cuda_runtime.h>

#include <cstdio>

#include "compiled/device.h"

namespace tp {

int cuda_device_count() {
  int n = 0;
  // No driver or no device is "zero devices", not an error: GPU tests skip on such machines.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "unknown CUDA device";
  char text[256];
  std::snprintf(text, sizeof text, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                double(prop.totalGlobalMem) / (1 << 30));
  return text;
}

}  // namespace tp
