// The pieces run_case is made of, shared by evaluation, NaN provenance and precision search:
// a case made concrete (model, input, session options), one reference run and one compiled
// run, each with its captured checkpoints.
#pragma once

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

struct PreparedCase {
  Case c;
  std::shared_ptr<const Model> model;  // boosted when the case says so
  std::shared_ptr<const Model> warm;   // run first in the same session (case option warm=)
  std::string pipeline;                // one the model's family runs
  Tensor input;                        // the primary input (what res= sizes), f32
  std::string input_name = "input";
  NamedTensors other_inputs;  // the pipeline's other inputs (a UNet's timestep, context ...)
  TilingOptions tiling;
  DType reference = DType::kF32;
  compiled::SessionOptions session;
  compiled::Device device = compiled::Device::kCpu;
  std::string
      policy_refusal;  // the compiled path's policy parser refused the dtypes (field report 3)

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

// A stream= case (harness/run/stream.cpp): `r` comes with its id, seed, repro and device.
CaseResult run_stream_case(const Case& c, const RunOptions& o, ModelCache& models, CaseResult r);

// Whether the compiled path should run the case's dtype combination (harness/run/support.cpp).
bool expected_supported(const Case& c);
// The same, also counting a policy without kernels as runnable when keep= holds every weighted
// layer of `m` in fp32.
bool case_supported(const Case& c, const Model& m);
// The outcome of an unsupported case: UNSUPPORTED when the compiled path refused it naming both
// dtypes, FAILED when it ran (`refusal` null) or refused without saying what.
Outcome judge_unsupported(const Case& c, const std::string* refusal, std::string& reason);

struct ReferenceRun {
  NamedTensors outputs;
  // Per graph name: its input and every op output a compiled group reads or stores, by value id
  // (not captured for tiled runs, whose graphs run once per tile).
  std::map<std::string, std::map<int, Tensor>> values;
  double seconds = 0;
};

struct GroupCapture {
  const compiled::Plan* plan = nullptr;
  int group = 0;
  NamedTensors stored;  // per group output, NCHW in storage dtype
};

struct CompiledRun {
  std::unique_ptr<compiled::Session> session;
  NamedTensors outputs;
  std::vector<GroupCapture> groups;  // execution order (empty for tiled runs)
  double seconds = 0;
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
Expected<int64_t> compile_pipeline_plans(compiled::Session& session, const Model& m,
                                         const std::string& pipeline, const NamedTensors& inputs);
// The values each graph's plans read or store: what the reference must capture.
std::map<std::string, std::vector<int>> checkpoint_values(const compiled::Session& session);

// A compiled group's input values in the compiled run, as it read them (NCHW, storage dtype):
// earlier groups' stored outputs, or the pipeline input.
std::map<int, Tensor> compiled_group_inputs(const PreparedCase& p, const CompiledRun& run,
                                            const GroupCapture& g);
// The input shape a plan's graph ran at.
Shape plan_input_shape(const ReferenceRun& ref, const compiled::Plan& plan);

struct Evaluation {
  std::vector<CheckpointRecord> checkpoints;  // groups in execution order, then pipeline outputs
  bool failed = false;
  std::string reason;       // the first failed check
  bool non_finite = false;  // a non-finite value where the reference is finite
  bool mistrusted = false;
  std::string mistrust_reason;
};

// Compares every captured checkpoint (with local error when `local`) and the outputs, against
// the tolerance table.
Evaluation evaluate(const PreparedCase& p, const ReferenceRun& ref, CompiledRun& run, bool local);

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

// A tiled case: "" or why the compiled engage decision differs from the config's rule, and the
// seam-band and tile-interior error of the tiled output against the untiled reference.
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
