#include "harness/runner/chained_output.h"

#include <cmath>

#include "harness/core/compare.h"

namespace tp {
namespace {

Expected<Tensor> output_named(const NamedTensors& outputs, const std::string& name,
                              const char* side) {
  const Tensor* t = find_tensor(outputs, name);
  if (!t) return Error(std::string("the ") + side + " run has no output " + name);
  return *t;
}

}  // namespace

PreparedCase stage_case(const PreparedCase& p, const std::string& pipeline, const Tensor& input) {
  PreparedCase q = p;
  q.warm.reset();
  q.pipeline = pipeline;
  q.input = input.to(DType::kF32);
  return q;
}

Expected<ChainedParts> chained_parts(const PreparedCase& p, const ReferenceRun& ref,
                                     const CompiledRun& run) {
  const Handoff& chain = *p.descriptor().handoff;
  const std::string staged = chain.prefix + chain.output;
  ChainedParts parts;
  Tensor got, want;
  const bool stages = find_tensor(run.outputs, staged) && find_tensor(ref.outputs, staged);
  if (stages) {
    got = *find_tensor(run.outputs, staged);
    want = *find_tensor(ref.outputs, staged);
    parts.got_alone = run.outputs;
  } else {
    const PreparedCase first = stage_case(p, chain.first_pipeline, p.input);
    TP_ASSIGN_OR_RETURN(ReferenceRun r, run_reference(first, {}));
    TP_ASSIGN_OR_RETURN(want, output_named(r.outputs, chain.output, "reference"));
    TP_ASSIGN_OR_RETURN(CompiledRun c, run_compiled(first, p.session.policy, false));
    TP_ASSIGN_OR_RETURN(got, output_named(c.outputs, chain.output, "compiled"));
    const PreparedCase second = stage_case(p, chain.second_pipeline, got);
    TP_ASSIGN_OR_RETURN(CompiledRun alone, run_compiled(second, p.session.policy, false));
    parts.got_alone = std::move(alone.outputs);
  }
  TP_ASSIGN_OR_RETURN(Metrics handoff, compare_tensors(got, want, got.dtype()));
  parts.handoff_rel_l2 = handoff.rel_l2;
  parts.handoff = got;
  TP_ASSIGN_OR_RETURN(ReferenceRun on_got,
                      run_reference(stage_case(p, chain.second_pipeline, got), {}));
  parts.want_alone = std::move(on_got.outputs);
  return parts;
}

double chained_gain(const ChainedParts& parts, const Tensor& want_alone, const Tensor& want) {
  if (!(parts.handoff_rel_l2 > 0)) return 1;
  auto m = compare_tensors(want_alone, want, DType::kF64);
  const double gain = m.ok() ? m->rel_l2 / parts.handoff_rel_l2 : 1;
  return std::isfinite(gain) ? gain : 1;  // an overflow downstream is the output's to report
}

}  // namespace tp
