#include "harness/cli/paths.h"

#include "reference/executor.h"
#ifdef TWINPATH_HAVE_TORCH
#include "reference/torch/torch_path.h"
#endif

namespace tp {

Expected<PathChoice> make_path(const std::string& name) {
  if (name == "reference" || name == "reference:fp64") {
    const DType dt = name == "reference" ? DType::kF32 : DType::kF64;
    return PathChoice{[dt](const Graph& g, const Weights& w, const NamedTensors& in) {
                        return ref::run_graph(g, w, in, dt);
                      },
                      std::string("reference (") + dtype_name(dt) + ")"};
  }
  if (name == "torch" || name == "torch:fp64") {
#ifdef TWINPATH_HAVE_TORCH
    const DType dt = name == "torch" ? DType::kF32 : DType::kF64;
    return PathChoice{[dt](const Graph& g, const Weights& w, const NamedTensors& in) -> Expected<NamedTensors> {
                        // The torch path has no size checks of its own; share the reference's.
                        for (const auto& [n, t] : in) TP_RETURN_IF_ERROR(ref::check_input_fits(g, t.shape()));
                        return torch_path::run_graph(g, w, in, dt);
                      },
                      std::string("torch (") + dtype_name(dt) + ", LibTorch CPU ops)"};
#else
    return Error("this twinpath was built without LibTorch, so the torch path is missing; install "
                 "libtorch-dev (tools/install-deps.sh) and rebuild");
#endif
  }
  return Error("unknown path '" + name + "'; use reference, reference:fp64, torch or torch:fp64");
}

}  // namespace tp
