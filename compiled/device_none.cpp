// Built without CUDA: no devices, and compiled:cuda says how to get it.
#include "compiled/backend.h"
#include "compiled/device.h"

namespace tp {

int cuda_device_count() { return 0; }
std::string cuda_device_description(int) { return "no CUDA in this build"; }
std::string cuda_versions() { return "no CUDA in this build (nvcc was not found)"; }

namespace compiled {
Expected<std::unique_ptr<Backend>> make_cuda_backend(CudaKernels, bool) {
  return Error(
      "compiled:cuda: this twinpath was built without CUDA (nvcc was not found); rebuild on a "
      "machine with the CUDA "
      "toolkit at /usr/local/cuda, or use compiled:cpu, which runs the same plans under the same "
      "numerics contract");
}
}  // namespace compiled

}  // namespace tp
