// What CUDA devices this process can use. Built without CUDA, there are none.
#pragma once

#include <string>

namespace tp {

int cuda_device_count();
std::string cuda_device_description(int device);  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
// The driver's and the runtime's CUDA versions ("driver CUDA 13.0, runtime 13.0"), or why none.
std::string cuda_versions();

}  // namespace tp
