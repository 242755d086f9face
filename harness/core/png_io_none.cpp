// PNG in a TWINPATH_GPU_ONLY build, which links no libpng: each call says so and what to do.
#include "harness/core/png_io.h"

namespace tp {
namespace {
Error no_png(const std::string& path) {
  return Error(path +
               ": this build reads and writes no PNG (configured with TWINPATH_GPU_ONLY); use "
               ".safetensors or .npy, or a full build");
}
}  // namespace

Expected<Tensor> read_png(const std::string& path) { return no_png(path); }
Status write_png(const std::string& path, const Tensor&) { return no_png(path); }

}  // namespace tp
