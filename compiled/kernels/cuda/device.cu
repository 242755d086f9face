#include <cuda_runtime.h>
#include <cudnn_graph.h>

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

std::string cuda_versions() {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();
  char text[128];
  if (driver == 0) {
    std::snprintf(text, sizeof text, "no CUDA driver; runtime %d.%d", runtime / 1000,
                  runtime % 1000 / 10);
    return text;
  }
  const size_t cudnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  std::snprintf(text, sizeof text, "driver CUDA %d.%d, runtime %d.%d, cuDNN %zu.%zu.%zu",
                driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10,
                cudnn / 10000, cudnn % 10000 / 100, cudnn % 100);
  return text;
}

}  // namespace tp
