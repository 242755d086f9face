// The pieces run_case is made of, shared by evaluation, NaN provenance and precision search:
// a case made concrete (model, input, session options), one reference run and one compiled
// run, each with its captured checkpoints.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cases/case.h"
#include "compiled/session.h"
#include "harness/models/model.h"
#include "harness/runner/case_runner.h"
#include "reports/result.h"

namespace tp {

// Another model a case's pipeline reads (PipelineDescriptor::models): the VAE of a text-to-image
// pipeline, the refiner of base + refiner.
struct OtherCaseModel {
  std::string option;  // the case option that names it ("vae")
  std::shared_ptr<const Model> model;
  std::string part;                 // the call-scope part its calls run under, or ""
  std::vector<std::string> graphs;  // its graphs' names (telling its calls apart when no part)
};

struct PreparedCase {
  Case c;
  std::shared_ptr<const Model> model;  // boosted when the case says so
  std::shared_ptr<const Model> warm;   // run first in the same session (case option warm=)
  std::vector<OtherCaseModel> others;  // the other models the pipeline reads
  std::string pipeline;                // one the model's family runs
  Tensor input;                        // the primary input (what res= sizes), f32
  std::string input_name = "input";
  NamedTensors other_inputs;  // the pipeline's other inputs (a UNet's timestep, context ...)
  TilingOptions tiling;
  DType reference = DType::kF32;
  compiled::SessionOptions session;
  compiled::Device device = compiled::Device::kCpu;
  CudaChoice cuda;  // the case's kernels= and graphs=, else the run's
  std::string
      policy_refusal;  // the compiled path's policy parser refused the dtypes (field report 3)
  // A tiled run captures every tile's groups (each tile a graph call, "tileK/") when the memory
  // allows; else only its outputs, seams and decision are checked, and `capture_note` says why.
  bool capture_tiles = true;
  std::string capture_note;
  // Whether the compiled run's groups are captured and judged (every untiled run).
  bool captures_groups() const { return !tiling.enabled || capture_tiles; }

  // The pipeline's descriptor (prepare_case checked that the family runs it).
  const PipelineDescriptor& descriptor() const { return *model->family().pipeline(pipeline); }
  // How the pipeline runs: tiling, the family's options and other models; a chained pipeline's
  // first-graph outputs too with `stage_outputs`.
  PipelineOptions options(bool stage_outputs = false) const {
    PipelineOptions o;
    o.tiling = tiling;
    o.stage_outputs = stage_outputs;
    o.values = c.options;
    for (const OtherCaseModel& m : others) o.models.emplace_back(m.option, m.model.get());
    return o;
  }
  // The model whose weights a call of `graph` in `scope` runs on: another model's when `graph`
  // is one of its graphs (the VAE's, in any part), else when the call is in its part (the
  // refiner's); else the case's model.
  const Model& model_of(const std::string& graph, const std::string& scope = "") const {
    for (const OtherCaseModel& m : others)
      if (m.part.empty() && std::find(m.graphs.begin(), m.graphs.end(), graph) != m.graphs.end())
        return *m.model;
    for (const OtherCaseModel& m : others)
      if (!m.part.empty() && scope.rfind(m.part, 0) == 0) return *m.model;
    return *model;
  }
  // Every model the case runs: its own, then the others.
  std::vector<const Model*> models() const {
    std::vector<const Model*> all{model.get()};
    for (const OtherCaseModel& m : others) all.push_back(m.model.get());
    return all;
  }
  // Every input, as the family's run() takes them.
  NamedTensors inputs() const {
    NamedTensors all{{input_name, input}};
    all.insert(all.end(), other_inputs.begin(), other_inputs.end());
    return all;
  }
};

// The case made concrete: model (boosted), input, session options; `refusal` is the outcome a
// failure stands for (ERROR, or SKIPPED when the device is missing).
Expected<PreparedCase> prepare_case(const Case& c, const RunOptions& o, ModelCache& models,
                                    Outcome& refusal);

// The line that reruns `c` as it ran: on CUDA with the device, the kernel set and graphs
// (`cuda`) written out, so a failure on one kernel set reproduces from it.
std::string case_repro(const Case& c, compiled::Device device, const CudaChoice& cuda);

// A stream= case (harness/runner/stream.cpp): `r` comes with its id, seed, repro and device.
CaseResult run_stream_case(const Case& c, const RunOptions& o, ModelCache& models, CaseResult r);

// Whether the compiled path should run the case's dtype combination (harness/runner/support.cpp).
bool expected_supported(const Case& c);
// The same, also counting a policy without kernels as runnable when keep= holds every weighted
// layer of `m` in fp32.
bool case_supported(const Case& c, const Model& m);
// The outcome of an unsupported case: UNSUPPORTED when the compiled path refused it naming both
// dtypes, FAILED when it ran (`refusal` null) or refused without saying what.
Outcome judge_unsupported(const Case& c, const std::string* refusal, std::string& reason);

// One call of a graph in a pipeline run: its scope (Family::call_scope: "" or "step3/") before
// the graph's name. A denoising loop calls its UNet once per step; each call's values are kept
// apart under its own key.
inline std::string call_key(const std::string& scope, const std::string& graph) {
  return scope + graph;
}
// A checkpoint's name without its call scope ("step3/mid_block.resnets.0" -> the module path).
std::string unscoped(const std::string& checkpoint);

struct ReferenceRun {
  NamedTensors outputs;
  // Per graph call (call_key): its inputs and every op output a compiled group reads or stores,
  // by value id (not captured for tiled runs, whose graphs run once per tile).
  std::map<std::string, std::map<int, Tensor>> values;
  double seconds = 0;
};

struct GroupCapture {
  const compiled::Plan* plan = nullptr;
  int group = 0;
  NamedTensors stored;  // per group output, NCHW in storage dtype
  std::string scope;    // the graph call's (Family::call_scope)
  std::string key() const { return call_key(scope, plan->graph->name); }
};

struct CompiledRun {
  std::unique_ptr<compiled::Session> session;
  NamedTensors outputs;
  std::vector<GroupCapture> groups;  // execution order (empty for a tiled run not captured)
  // Per graph call (call_key): the inputs the pipeline gave it (captured runs; a chained
  // pipeline's second graph reads the first's output in place and has none).
  std::map<std::string, NamedTensors> call_inputs;
  double seconds = 0;
};

// An executor that names each graph call by the family's call scope as it passes it on (the
// inner executor runs it unchanged), and tells `on_call` first. In a tiled run every call of a
// graph is a tile: `tiles` names them "tile0/", "tile1/", ... in the order the tiler runs them.
class ScopedExecutor : public GraphExecutor {
 public:
  using OnCall =
      std::function<void(const std::string& scope, const Graph& graph, const NamedTensors& inputs)>;
  ScopedExecutor(GraphExecutor& inner, const Family& family, std::string pipeline,
                 OnCall on_call = {}, bool tiles = false)
      : inner_(inner),
        family_(family),
        pipeline_(std::move(pipeline)),
        on_call_(std::move(on_call)),
        tiles_(tiles) {}
  Expected<NamedTensors> run(const Graph& graph, const Weights& weights,
                             const NamedTensors& inputs) override;
  Expected<NamedTensors> run_chained(const Graph& first, const Graph& second,
                                     const Weights& weights, const NamedTensors& inputs,
                                     const std::string& handoff) override;
  bool streams_tiles() const override { return inner_.streams_tiles(); }
  void record_tiling(const TilingDecision& d) override { inner_.record_tiling(d); }
  bool injects(std::string_view fault) const override { return inner_.injects(fault); }
  void set_part(const std::string& prefix) override { part_ = prefix; }
  // The scope of the latest call of `graph` ("" before any).
  const std::string& scope_of(const std::string& graph) const;

 private:
  const std::string& enter(const Graph& graph);
  GraphExecutor& inner_;
  const Family& family_;
  std::string pipeline_;
  OnCall on_call_;
  bool tiles_ = false;
  std::string part_;                  // set_part's: before every scope, counted apart
  std::map<std::string, int> calls_;  // by part and graph name
  std::map<std::string, std::string> scopes_;
};

// Runs the reference, capturing the values `wanted` names per graph (empty: outputs only).
Expected<ReferenceRun> run_reference(const PreparedCase& p,
                                     const std::map<std::string, std::vector<int>>& wanted);
// A compiled session with `options` on the case's device (the emulation, or CUDA).
Expected<std::unique_ptr<compiled::Session>> new_compiled_session(const PreparedCase& p,
                                                                  compiled::SessionOptions options);
// Runs the compiled path under `policy` (the case's, or the precision search's variant), in a
// new session, or in `session` when given (made with that policy; its plans may be compiled).
Expected<CompiledRun> run_compiled(const PreparedCase& p, const compiled::DTypePolicy& policy,
                                   bool capture,
                                   std::unique_ptr<compiled::Session> session = nullptr);
// Compiles (or finds) the plans `pipeline` runs on `inputs` (the primary first) in `session`,
// allocating nothing, and
// returns the arena bytes they hold at once (a roundtrip's encoder and decoder are co-resident).
// A pipeline whose family gives no stages (a denoising loop, whose graphs and their inputs come
// from its code) is planned by running its code on an executor that only plans: each graph call
// is compiled (or found) and answered with zeros of its output shapes; the bytes returned are
// then the largest arena (the calls run one at a time).
Expected<int64_t> compile_pipeline_plans(compiled::Session& session, const Model& m,
                                         const std::string& pipeline, const NamedTensors& inputs,
                                         const PipelineOptions& options = {});
// The values each graph's plans read or store, and the inputs of ReLUs inside groups (for
// their conditioning): what the reference must capture.
std::map<std::string, std::vector<int>> checkpoint_values(const compiled::Session& session);

// A compiled group's input values in the compiled run, as it read them (NCHW, storage dtype):
// earlier groups' stored outputs, or the pipeline input.
std::map<int, Tensor> compiled_group_inputs(const PreparedCase& p, const CompiledRun& run,
                                            const GroupCapture& g);
// The input shape a captured group's graph call ran at.
Shape plan_input_shape(const ReferenceRun& ref, const GroupCapture& g);

struct Evaluation {
  std::vector<CheckpointRecord> checkpoints;  // groups in execution order, then pipeline outputs
  bool failed = false;
  std::string reason;       // the first failed check
  bool non_finite = false;  // a non-finite value where the reference is finite
  bool mistrusted = false;
  std::string mistrust_reason;
  // A reference output constant or holding non-finite values: on this input the case proves
  // nothing there (a drawn config's case then searches another input scale, case_runner.h).
  bool degenerate_reference = false;
};

// Compares every captured checkpoint (with local error when `local`) and the outputs, against
// the tolerance table; with `contract`, checks every captured group's stored outputs against
// the numerics contract on the inputs the compiled run stored.
Evaluation evaluate(const PreparedCase& p, const ReferenceRun& ref, CompiledRun& run, bool local,
                    const ContractChecker& contract = {});

// Group `group` of `plan` replayed op by op on `inputs` (as the compiled run read them): the op
// and element that first went non-finite and why. With the reference's weights and its values
// of the group's inputs, also what the reference holds there.
Provenance analyze_group(const compiled::Plan& plan, int group, const Shape& input_shape,
                         const std::map<int, Tensor>& inputs,
                         const Weights* reference_weights = nullptr,
                         const std::map<int, Tensor>* reference_inputs = nullptr);
// A non-finite value in the pipeline input itself (cause propagated-from-input), or not found.
Provenance input_provenance(const Tensor& input);
// The first group that made a non-finite value from finite inputs, replayed op by op.
Provenance locate_non_finite(const PreparedCase& p, const ReferenceRun& ref,
                             const CompiledRun& run);

// A tiled case, or one whose pipeline recorded decisions (a video VAE's, which tiles in time by
// default): "" or why a compiled engage decision differs from the config's rule, and, when it
// tiled, the seam-band and tile-interior error of the tiled output against the untiled
// reference (tiling off in space and in time).
struct TilingCheck {
  std::string failure;
  std::vector<CheckpointRecord> records;  // "seam:<output>", "interior:<output>"
};
TilingCheck check_tiling(const PreparedCase& p, const CompiledRun& run);

// "" when shared runtimes give the isolated runs' bits (warm=, a roundtrip's co-resident
// encoder and decoder), else the first output and checkpoint that differ.
std::string check_isolation(const PreparedCase& p, const CompiledRun& run);
// "" when the case's own session (`run`'s), serving its VAE through both pipelines in turn after
// the roundtrip (decode, encode, decode, encode, decode), gives each call the bits it has in a
// session of its own (interleave=on).
std::string check_interleaved(const PreparedCase& p, CompiledRun& run);
// "" when plans saved and loaded into a fresh session give the same bits as the run that saved
// them.
std::string check_plan_reload(const PreparedCase& p);

struct SearchResult {
  bool found = false;
  std::vector<std::string> keep_fp32;
  std::string note;
  int runs = 0;
};
// The smallest set of layers (module names) to keep in fp32 so the case passes.
SearchResult search_keep_fp32(const PreparedCase& p, const ReferenceRun& ref,
                              const CompiledRun& failing, const Evaluation& failed,
                              const Provenance& origin);

}  // namespace tp
