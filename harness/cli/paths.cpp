#include "harness/cli/paths.h"

#include <memory>

#include "compiled/describe_session.h"
#include "compiled/plan_file.h"
#include "reference/executor.h"
#ifdef TWINPATH_HAVE_TORCH
#include "reference/torch/contract_check.h"
#include "reference/torch/torch_path.h"
#endif

namespace tp {
namespace {

PathChoice graph_path(GraphRunner runner, std::string description, const PipelineOptions& options) {
  return PathChoice{
      [runner, options](const Model& m, const std::string& p, const NamedTensors& in) {
        return run_model(m, p, in, runner, options);
      },
      std::move(description),
      {},
      {}};
}

// The models a pipeline's session holds plans for: the model, and the other models it reads (a
// text-to-image pipeline's VAE, a refiner).
std::vector<compiled::PlanModel> plan_models(const Model& m, const PipelineOptions& options) {
  std::vector<compiled::PlanModel> models{{m.family().graphs(*m.config), &m.weights, m.dir}};
  for (const auto& [option, x] : options.models)
    if (x) models.push_back({x->family().graphs(*x->config), &x->weights, x->dir});
  return models;
}

// compiled:cpu (the emulation) or compiled:cuda.
Expected<PathChoice> compiled_path(bool cuda, const CompiledOptions& o,
                                   const PipelineOptions& options) {
  compiled::SessionOptions so;
  TP_ASSIGN_OR_RETURN(so.policy.base, compiled::parse_layer_policy(o.policy));
  TP_ASSIGN_OR_RETURN(so.policy.keep_fp32, compiled::parse_keep_fp32(o.keep_fp32));
  if ((!o.cast_skip.empty() || !o.load.empty() || !o.fuse_qkv.empty()) && !so.policy.base.layerwise)
    return Error(
        "--cast-skip, --load and --fuse-qkv describe layerwise casting; add cast=layerwise to "
        "--policy");
  if (!o.cast_skip.empty()) {
    TP_ASSIGN_OR_RETURN(so.policy.cast_skip, compiled::parse_keep_fp32(o.cast_skip));
  }
  if (!o.load.empty()) {
    TP_ASSIGN_OR_RETURN(so.policy.load, parse_dtype(o.load));
  }
  if (!o.fuse_qkv.empty()) {
    TP_ASSIGN_OR_RETURN(so.policy.fuse_qkv, parse_qkv_fusion(o.fuse_qkv));
  }
  TP_ASSIGN_OR_RETURN(so.faults, compiled::parse_faults(o.inject));
  TP_ASSIGN_OR_RETURN(so.shapes, compiled::parse_shape_policy(o.shape_policy));
  so.validate_plans = o.validate_plans;
  TP_ASSIGN_OR_RETURN(
      std::unique_ptr<compiled::Backend> backend,
      compiled::make_backend(cuda ? compiled::Device::kCuda : compiled::Device::kCpu));
  std::string description = cuda ? "compiled:cuda (" + backend->description() + ", "
                                 : std::string("compiled:cpu (emulated kernels, ");
  auto session = std::make_shared<compiled::Session>(so, std::move(backend));
  description += so.policy.to_string() + ", shapes " + so.shapes.to_string();
  if (!so.faults.empty()) description += ", INJECTED FAULTS " + so.faults.to_string();
  return PathChoice{
      [session, o, options](const Model& m, const std::string& p,
                            const NamedTensors& in) -> Expected<NamedTensors> {
        if (!o.load_plan.empty() && session->stats().loaded == 0)
          TP_RETURN_IF_ERROR(compiled::load_plans(*session, plan_models(m, options), o.load_plan));
        TP_ASSIGN_OR_RETURN(NamedTensors out, run_model(m, p, in, *session, options));
        if (!o.save_plan.empty()) TP_RETURN_IF_ERROR(compiled::save_plans(*session, o.save_plan));
        return out;
      },
      description + ")", [session] { return compiled::describe_session(*session); },
      // Plan files name the weights by their identity, computed again from the whole checkpoint.
      o.load_plan.empty() && o.save_plan.empty()
          ? std::function<void(Weights&)>([session](Weights& w) { session->consume(w); })
          : nullptr};
}

}  // namespace

ContractChecker contract_checker() {
#ifdef TWINPATH_HAVE_TORCH
  return torch_path::contract_intervals;
#else
  return {};
#endif
}

bool is_compiled_path(const std::string& name) { return name.rfind("compiled:", 0) == 0; }

Expected<PathChoice> make_path(const std::string& name, const CompiledOptions& compiled,
                               const PipelineOptions& options) {
  if (name == "reference" || name == "reference:fp64") {
    const DType dt = name == "reference" ? DType::kF32 : DType::kF64;
    return graph_path([dt](const Graph& g, const Weights& w,
                           const NamedTensors& in) { return ref::run_graph(g, w, in, dt); },
                      std::string("reference (") + dtype_name(dt) + ")", options);
  }
  if (name == "torch" || name == "torch:fp64") {
#ifdef TWINPATH_HAVE_TORCH
    const DType dt = name == "torch" ? DType::kF32 : DType::kF64;
    return graph_path(
        [dt](const Graph& g, const Weights& w, const NamedTensors& in) -> Expected<NamedTensors> {
          // The torch path has no size checks of its own; share the reference's.
          TP_RETURN_IF_ERROR(ref::check_inputs_fit(g, in));
          return torch_path::run_graph(g, w, in, dt);
        },
        std::string("torch (") + dtype_name(dt) + ", LibTorch CPU ops)", options);
#else
    return Error(
        "this twinpath was built without LibTorch, so the torch path is missing; install "
        "libtorch-dev (tools/install-deps.sh) and rebuild");
#endif
  }
  if (name == "compiled:cpu" || name == "compiled:cuda")
    return compiled_path(name == "compiled:cuda", compiled, options);
  return Error(
      "unknown path '" + name +
      "'; use reference, reference:fp64, torch, torch:fp64, compiled:cpu or compiled:cuda");
}

}  // namespace tp
