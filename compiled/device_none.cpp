#include "compiled/device.h"

namespace tp {

int cuda_device_count() { return 0; }
std::string cuda_device_description(int) { return "no CUDA in this build"; }

}  // namespace tp
