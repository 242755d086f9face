#include "harness/core/cuda_choice.h"

namespace tp {

Expected<CudaKernels> parse_cuda_kernels(std::string_view name, std::string_view spelled) {
  if (name == "per-op") return CudaKernels::kPerOp;
  if (name == "fused") return CudaKernels::kFused;
  return Error(std::string(spelled) + std::string(name) +
               " is unknown; use per-op (the kernels proven on a GPU) or fused (cuDNN convs and "
               "fused epilogues)");
}

const char* cuda_kernels_name(CudaKernels kernels) {
  return kernels == CudaKernels::kFused ? "fused" : "per-op";
}

Expected<bool> parse_cuda_graphs(std::string_view value, std::string_view spelled) {
  if (value == "on") return true;
  if (value == "off") return false;
  return Error(std::string(spelled) + std::string(value) +
               " is unknown; use on (replay each plan as a CUDA graph) or off (launch each "
               "kernel from the host)");
}

std::string CudaChoice::text() const {
  return std::string("kernels=") + cuda_kernels_name(kernels) +
         " graphs=" + (graphs ? "on" : "off");
}

}  // namespace tp
