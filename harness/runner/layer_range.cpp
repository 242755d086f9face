#include "harness/runner/layer_range.h"

#include <cmath>
#include <cstdio>

#include "harness/core/executor.h"
#include "harness/core/format.h"
#include "harness/runner/activation_mapping.h"
#include "reference/executor.h"

namespace tp {
namespace {

bool is_layer(const std::string& op, const std::string& layer) {
  return op == layer || activations::under(op, layer);
}

}  // namespace

Expected<LayerRange> layer_output_range(const Model& model, const std::string& layer) {
  const Family& family = model.family();
  const GraphRunner plain = [](const Graph& g, const Weights& w, const NamedTensors& in) {
    return ref::run_graph(g, w, in, DType::kF32);
  };
  for (const PipelineDescriptor& d : family.pipelines()) {
    bool needs_other = false;
    for (const OtherModel& other : d.models) needs_other = needs_other || other.required;
    if (needs_other) continue;
    LayerRange range;
    range.pipeline = d.name;
    bool seen = false;
    FunctionExecutor watched([&](const Graph& g, const Weights& w, const NamedTensors& in) {
      return ref::run_graph(g, w, in, DType::kF32, [&](const Op& op, const Tensor& x) {
        if (!is_layer(op.name, layer)) return;
        seen = true;
        range.max_abs = std::max(range.max_abs, activations::max_abs_finite(x.to(DType::kF32)));
      });
    });
    InputRequest request{d.name, range.height, range.width, 0, false, 1};
    TP_ASSIGN_OR_RETURN(NamedTensors inputs, family.generate_inputs(model, request, plain));
    TP_ASSIGN_OR_RETURN(inputs, family.bind_inputs(model, d.name, inputs));
    if (auto ran = family.run(model, d.name, inputs, watched); !ran.ok()) return ran.error();
    if (seen) return range;
  }
  return Error(layer + " is not a layer the model's pipelines run");
}

std::string scaled_layer_advice(const std::string& layer, double factor, const LayerRange& range) {
  const double before = range.max_abs / std::fabs(factor);
  std::string s = layer + " on the reference (" + range.pipeline + ", a seeded " +
                  std::to_string(range.height) + "x" + std::to_string(range.width) +
                  " input): its output reaches |x| " + printf_numbers("%.3g", range.max_abs) +
                  " scaled, " + printf_numbers("%.3g", before) + " before";
  if (!(before > 0)) return s + "; a zero output never overflows";
  // The activation dtypes a policy stores (a=f16, a=bf16).
  const double f16 = dtype_max_finite(DType::kF16), bf16 = dtype_max_finite(DType::kBF16);
  return s + "; its output leaves f16 (max 65504) from a factor of about " +
         printf_numbers("%.3g", f16 / before) + ", bf16 from about " +
         printf_numbers("%.3g", bf16 / before) + " (a later layer may overflow first)";
}

}  // namespace tp
