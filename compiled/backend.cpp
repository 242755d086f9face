#include "compiled/backend.h"

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

Expected<std::unique_ptr<Backend>> make_backend(Device device) {
  if (device == Device::kCuda) return make_cuda_backend();
  return make_emulated_backend();
}

}  // namespace tp::compiled
