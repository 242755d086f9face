#include "compiled/backend.h"

#include <cstdlib>

namespace tp::compiled {

Expected<Device> parse_device(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return Error("--device " + std::string(name) +
               " is unknown; use cpu (the emulated kernels) or cuda (the CUDA kernels)");
}

const char* device_flag_name(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

const char* device_report_name(Device device) {
  return device == Device::kCuda ? "cuda" : "cpu-emulated";
}

Expected<CudaKernels> cuda_kernels_from_environment() {
  const char* v = std::getenv("TWINPATH_CUDA_KERNELS");
  if (!v || !*v) return CudaKernels::kFused;
  return parse_cuda_kernels(v);
}

Expected<bool> cuda_graphs_from_environment() {
  const char* v = std::getenv("TWINPATH_CUDA_GRAPHS");
  if (!v || !*v || std::string_view(v) == "1") return true;
  if (std::string_view(v) == "0") return false;
  return Error("TWINPATH_CUDA_GRAPHS=" + std::string(v) +
               " is unknown; use 1 (replay each plan as a CUDA graph) or 0 (launch each kernel)");
}

Expected<CudaChoice> cuda_choice_from_environment() {
  CudaChoice choice;
  TP_ASSIGN_OR_RETURN(choice.kernels, cuda_kernels_from_environment());
  TP_ASSIGN_OR_RETURN(choice.graphs, cuda_graphs_from_environment());
  return choice;
}

Expected<std::unique_ptr<Backend>> make_cuda_backend() {
  TP_ASSIGN_OR_RETURN(CudaChoice choice, cuda_choice_from_environment());
  return make_cuda_backend(choice.kernels, choice.graphs);
}

Expected<std::unique_ptr<Backend>> make_backend(Device device) {
  if (device == Device::kCuda) return make_cuda_backend();
  return make_emulated_backend();
}

Expected<std::unique_ptr<Backend>> make_backend(Device device, const CudaChoice& cuda) {
  if (device == Device::kCuda) return make_cuda_backend(cuda.kernels, cuda.graphs);
  return make_emulated_backend();
}

}  // namespace tp::compiled
