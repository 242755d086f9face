#include "harness/runner/case_runner.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cases/stress_inputs.h"
#include "compiled/backend.h"
#include "compiled/describe_session.h"
#include "harness/core/format.h"
#include "harness/core/layerwise_casting.h"
#include "harness/core/names.h"
#include "harness/core/numbers.h"
#include "harness/core/rng.h"
#include "harness/core/tensor_io.h"
#include "harness/models/config_space.h"
#include "harness/runner/group_repro.h"
#include "harness/runner/memory_budget.h"
#include "harness/runner/runs.h"
#include "reference/executor.h"

namespace tp {
namespace {

// A model is seeded from its name: every case on `tiny-kl` shares its weights.
uint64_t model_seed(const std::string& name) { return hash_name("model:" + name); }

// The case's inputs, the primary one first: generated (seeded from the case), or read from a
// file (the primary one, and the others the file holds by name; the rest generated).
Expected<NamedTensors> case_inputs(const Case& c, const Model& m, const std::string& pipeline) {
  const Family& family = m.family();
  const std::optional<double> sigma = normal_sigma(c.input);
  const bool from_file = !(sigma || c.input == "image" || is_stress_input(c.input));
  InputRequest r;
  r.pipeline = pipeline;
  r.height = c.height;
  r.width = c.width;
  r.seed = c.seed();
  r.image = c.input == "image";
  r.sigma = sigma.value_or(1.0);  // parse_case checked SIGMA (a finite number above 0)
  r.options = c.options;
  const GraphRunner reference = [](const Graph& g, const Weights& w, const NamedTensors& in) {
    return ref::run_graph(g, w, in, DType::kF32);
  };
  if (!from_file) {
    TP_ASSIGN_OR_RETURN(NamedTensors inputs, family.generate_inputs(m, r, reference));
    if (is_stress_input(c.input))
      inputs.front().second = stress_input(inputs.front().second, c.input, c.seed());
    return family.bind_inputs(m, pipeline, inputs);
  }
  TP_ASSIGN_OR_RETURN(NamedTensors file, read_tensor_file(c.input));
  TP_ASSIGN_OR_RETURN(Tensor t, family.select_input(pipeline, file, c.input));
  TP_ASSIGN_OR_RETURN(Shape want,
                      family.input_shape(*m.config, pipeline, c.height, c.width, c.options));
  // The same channels and spatial grid, another size between them (a video's frames).
  const bool same_grid = t.rank() == int(want.size()) && t.rank() >= 4 && t.dim(1) == want[1] &&
                         std::equal(want.end() - 2, want.end(), t.shape().end() - 2);
  if (same_grid && !std::equal(want.begin() + 1, want.end(), t.shape().begin() + 1))
    return Error(c.input + " holds " + shape_string(t.shape()) + ", not the " + shape_string(want) +
                 " that res= and the case's family options make; give the case the options "
                 "that match the input (`twinpath cases options` lists them)");
  if (!same_grid)
    return Error(c.input + " holds " + shape_string(t.shape()) +
                 ", not res=" + std::to_string(c.height) + "x" + std::to_string(c.width) +
                 " (which takes " + shape_string(want) + "); give the case the input's resolution");
  // The file's other inputs by name (a user's timestep and context, for triage); what it lacks
  // is generated.
  TP_ASSIGN_OR_RETURN(NamedTensors inputs, family.generate_inputs(m, r, reference));
  inputs.front().second = t.to(DType::kF32);
  if (auto named = family.select_inputs(pipeline, file, c.input); named.ok())
    for (std::size_t i = 1; i < inputs.size(); ++i)
      if (const Tensor* given = find_tensor(*named, inputs[i].first))
        inputs[i].second = given->to(DType::kF32);
  return family.bind_inputs(m, pipeline, inputs);
}

// Layers kept in fp32 run w=f32,a=f32, which every build supports: a policy without kernels
// still runs when every layer with a weight matrix is kept.
bool every_weighted_layer_kept(const Case& c, const Model& m) {
  if (c.keep_fp32.empty()) return false;
  for (const Graph& g : m.family().graphs(*m.config))
    for (const Op& op : g.ops) {
      if (!is_matrix_op(op.kind)) continue;
      bool kept = false;
      for (const std::string& glob : c.keep_fp32)
        kept = kept || compiled::glob_match(glob, op.name);
      if (!kept) return false;
    }
  return true;
}

// A keep glob that names no layer would silently keep nothing: refused with what names look like.
Status check_keep_globs(const std::vector<std::string>& globs,
                        const std::vector<const Model*>& models) {
  if (globs.empty()) return Status();
  std::vector<std::string> layers;
  std::string example;
  for (const Model* m : models)
    for (const Graph& g : m->family().graphs(*m->config))
      for (const Op& op : g.ops) {
        layers.push_back(op.name);
        if (example.empty() && !op.weight.empty()) example = op.name;
      }
  for (const std::string& glob : globs)
    if (std::none_of(layers.begin(), layers.end(),
                     [&](const std::string& l) { return compiled::glob_match(glob, l); }))
      return Error("keep=" + glob +
                   " matches no layer of the case's models, so it would keep nothing in fp32; "
                   "layers are named by their diffusers module paths, such as '" +
                   example + "' (separate several globs with '+')");
  return Status();
}

// The parts of a policy keep-fp32 cannot override: the dtypes must exist as storage at all.
bool expected_supported_base_in_fp32(const Case& c) {
  Case fp32 = c;
  fp32.policy.weight = fp32.policy.activation = fp32.policy.accumulation = DType::kF32;
  const DType a = c.policy.activation;
  return !dtype_is_fp8(a) && a != DType::kF64 && c.policy.weight != DType::kF64 &&
         expected_supported(fp32);
}

std::string dtypes_text(const Case& c) { return dtypes_string(c.policy); }

void dump(CaseResult& r, const std::string& name, const Tensor& got, const Tensor& want) {
  r.dumps.emplace_back(name + "/compiled", got.to(DType::kF32));
  r.dumps.emplace_back(name + "/reference", want.to(DType::kF32));
}

void add_dumps(CaseResult& r, const RunOptions& o, const ReferenceRun& ref,
               const CompiledRun& run) {
  if (o.dump == DumpPolicy::kNone ||
      (o.dump == DumpPolicy::kFailing && r.outcome == Outcome::kPassed))
    return;
  std::map<std::string, bool> failing;
  for (const CheckpointRecord& c : r.checkpoints) failing[c.name] = !c.passed;
  for (const GroupCapture& g : run.groups) {
    const compiled::Group& grp = g.plan->groups[std::size_t(g.group)];
    for (std::size_t i = 0; i < grp.outputs.size(); ++i)
      if (o.dump == DumpPolicy::kAll || failing[g.scope + grp.checkpoints[i]])
        dump(r, g.scope + grp.checkpoints[i], g.stored[i].second,
             ref.values.at(g.key()).at(grp.outputs[i]));
  }
  for (const auto& [name, got] : run.outputs)
    if (const Tensor* want = find_tensor(ref.outputs, name)) dump(r, "output:" + name, got, *want);
}

// Whether the reference made the call `g` belongs to, on the same input shape.
bool same_call(const ReferenceRun& ref, const CompiledRun& run, const GroupCapture& g) {
  const auto want = ref.values.find(g.key());
  if (want == ref.values.end()) return false;
  const auto given = run.call_inputs.find(g.key());
  const auto input = want->second.find(g.plan->graph->inputs[0].second);
  if (given == run.call_inputs.end() || given->second.empty() || input == want->second.end())
    return true;  // a chained graph's input was not captured: the names tell
  return given->second.front().second.shape() == input->second.shape();
}

// Refuses, before the inputs are made, a case whose estimate exceeds its budget: mem=, --mem,
// or the machine's available memory. A pipeline the estimate cannot follow is left to the run,
// which says what is wrong with it. A tiled case that fits only without keeping every tile's
// values runs without them (its outputs, seams and decision still checked), and says so.
Status check_memory(PreparedCase& p, const RunOptions& o) {
  const BudgetChoice budget = choose_memory_budget(p.c.memory_limit, o.memory_budget);
  auto estimate = estimate_case_memory(p, bool(o.contract));
  if (!estimate.ok()) return Status();
  std::string refusal = memory_refusal(p, *estimate, budget.bytes, budget.source);
  if (!refusal.empty() && p.tiling.enabled && p.capture_tiles) {
    PreparedCase bare = p;
    bare.capture_tiles = false;
    if (auto lighter = estimate_case_memory(bare, bool(o.contract)); lighter.ok())
      if (memory_refusal(bare, *lighter, budget.bytes, budget.source).empty()) {
        p.capture_tiles = false;
        p.capture_note = "tiles' groups not captured: keeping every tile's values needs about " +
                         estimate->text() + ", over the budget of " + format_bytes(budget.bytes);
        return Status();
      }
  }
  if (!refusal.empty()) return Error(refusal);
  return Status();
}

}  // namespace

Expected<std::shared_ptr<const Model>> ModelCache::get(const std::string& name_or_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = models_.find(name_or_dir);
  if (it != models_.end()) return it->second;
  // A built-in name, optionally with @SEED; anything else is a folder.
  const std::size_t at = name_or_dir.rfind('@');
  const std::string name = at == std::string::npos ? name_or_dir : name_or_dir.substr(0, at);
  const bool builtin = names_builtin_config(name);
  uint64_t seed = model_seed(name);
  if (builtin && at != std::string::npos) {
    const std::string digits = name_or_dir.substr(at + 1);
    if (digits.empty() || digits.size() > 18 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return Error("model=" + name_or_dir + ": the seed after @ must be a number, e.g. " + name +
                   "@7");
    seed = parse_number<uint64_t>(digits).value_or(seed);
  }
  std::error_code ec;
  if (!builtin && !std::filesystem::is_directory(name_or_dir, ec))
    return Error(name_or_dir + " is neither a built-in model (" +
                 comma_list(builtin_config_names()) +
                 "), a drawn config (random:FAMILY:SEED) nor a model folder; pass a diffusers "
                 "model folder (config.json + "
                 "diffusion_pytorch_model.safetensors), or make one with `twinpath model init`" +
                 did_you_mean(name, builtin_config_names()));
  Expected<Model> m = builtin ? make_model(name, seed) : load_model(name_or_dir);
  if (!m.ok()) return m.error();
  auto shared = std::make_shared<const Model>(std::move(m).value());
  models_[name_or_dir] = shared;
  return shared;
}

namespace {

// The other models the case's pipeline reads, by the options that name them; an error for one
// it needs that the case does not name.
Status load_other_models(PreparedCase& p, ModelCache& models) {
  TP_RETURN_IF_ERROR(check_required_models(p.pipeline, p.c.options));
  for (const OtherModel& other : p.descriptor().models) {
    const std::string name = given_option(p.c.options, other.option);
    if (name.empty()) continue;
    auto m = models.get(name);
    if (!m.ok()) return Error(other.option + "=" + name + ": " + m.error().message());
    OtherCaseModel o{other.option, *m, other.part, {}};
    for (const Graph& g : (*m)->family().graphs(*(*m)->config)) o.graphs.push_back(g.name);
    p.others.push_back(std::move(o));
  }
  return Status();
}

// The case's kernels= and graphs= over the run's.
CudaChoice cuda_choice(const Case& c, const RunOptions& o) {
  CudaChoice choice = o.cuda;
  if (c.kernels) choice.kernels = *c.kernels;
  if (c.graphs) choice.graphs = *c.graphs;
  return choice;
}

}  // namespace

// The case made concrete; `refusal` says which outcome a failure is (ERROR or SKIPPED). A policy
// the compiled path refuses is recorded, not refused here: run_case checks it against expectations.
Expected<PreparedCase> prepare_case(const Case& c, const RunOptions& o, ModelCache& models,
                                    Outcome& refusal) {
  PreparedCase p;
  p.c = c;
  p.device = o.device;
  refusal = Outcome::kError;
  p.pipeline = c.pipeline;
  TP_ASSIGN_OR_RETURN(p.model, models.get(c.model));
  TP_RETURN_IF_ERROR(check_family_runs(*p.model, p.pipeline));
  if (c.tiling && !p.model->family().pipeline(p.pipeline)->tiles)
    return Error("tiling=on: " + p.model->family().class_name() + " does not tile " + p.pipeline);
  if (!c.boost_layer.empty() || c.tie_weights || c.weight_scale != 1) {
    Model m = *p.model;
    if (c.tie_weights) make_weights_tie_prone(m);
    if (c.weight_scale != 1) scale_weight_matrices(m, c.weight_scale);
    if (!c.boost_layer.empty()) TP_RETURN_IF_ERROR(scale_layer(m, c.boost_layer, c.boost_factor));
    p.model = std::make_shared<const Model>(std::move(m));
  }
  TP_RETURN_IF_ERROR(load_other_models(p, models));
  TP_RETURN_IF_ERROR(check_keep_globs(c.keep_fp32, p.models()));
  if (!c.warm.empty()) {
    TP_ASSIGN_OR_RETURN(p.warm, models.get(c.warm));
    TP_RETURN_IF_ERROR(check_family_runs(*p.warm, p.pipeline));
  }
  p.reference = c.reference;
  p.tiling = TilingOptions{c.tiling,    c.tile_min,        c.tile_stride,
                           c.framewise, c.tile_min_frames, c.tile_stride_frames};
  if (o.check_memory) TP_RETURN_IF_ERROR(check_memory(p, o));
  TP_ASSIGN_OR_RETURN(NamedTensors inputs, case_inputs(c, *p.model, p.pipeline));
  p.input_name = inputs.front().first;
  p.input = inputs.front().second;
  p.other_inputs.assign(inputs.begin() + 1, inputs.end());
  TP_ASSIGN_OR_RETURN(p.session.faults, compiled::parse_faults(join_list(c.inject, ',')));
  p.session.policy.keep_fp32 = c.keep_fp32;
  p.session.policy.cast_skip = c.cast_skip;
  p.session.policy.load = c.load;
  p.session.policy.fuse_qkv = c.fuse_qkv;
  TP_ASSIGN_OR_RETURN(p.session.shapes, compiled::parse_shape_policy(c.shapes));
  p.session.memory_limit_bytes = c.memory_limit;
  p.session.validate_plans = true;  // the gate checks every plan before it runs
  if (Status policy = compiled::check_layer_policy(c.policy); policy.ok())
    p.session.policy.base = c.policy;
  else
    p.policy_refusal = policy.error().message();
  p.cuda = cuda_choice(c, o);
  if (o.device == compiled::Device::kCuda) {
    refusal = Outcome::kSkipped;
    TP_ASSIGN_OR_RETURN(auto backend, compiled::make_backend(o.device, p.cuda));
  } else if (c.kernels || c.graphs) {
    refusal = Outcome::kSkipped;
    return Error(
        "kernels= and graphs= choose how the CUDA backend runs; this run is on the CPU "
        "emulation: add --device cuda");
  }
  refusal = Outcome::kError;
  return p;
}

std::string case_repro(const Case& c, compiled::Device device, const CudaChoice& cuda) {
  if (device != compiled::Device::kCuda) return repro_command(c);
  Case shown = c;
  shown.kernels = cuda.kernels;
  shown.graphs = cuda.graphs;
  return "twinpath run --device cuda --case '" + shown.id() + "'";
}

// The N-dimensional ops (transformer blocks, the UNet's) accumulate in f32 only: acc=f16, which
// exists to reproduce the VAE's field bugs, has no kernels for them.
bool accumulates_f16_in_nd_ops(const Case& c, const Model& m) {
  if (c.policy.accumulation != DType::kF16) return false;
  for (const Graph& g : m.family().graphs(*m.config))
    if (g.has_nd_ops()) return true;
  return false;
}

// Layerwise casting that would hand a kernel mismatched dtypes (dit-facts 10.5): a model
// loaded in fp8 whose skipped layers nothing casts up (field report 3), or a skip list of the
// user's that casts a layer the model keeps in fp32 (its input then follows it into fp8), an
// attention's projections fused after the casting was enabled (the fused Linear stays fp8).
bool layerwise_mismatch(const Case& c, const Model& m) {
  if (!c.policy.layerwise) return false;
  if (c.load && dtype_is_fp8(*c.load)) return true;
  const bool fused_after = c.fuse_qkv == QkvFusion::kAfterCast;
  if (!c.cast_skip && !fused_after) return false;
  for (const Graph& g : m.family().graphs(*m.config)) {
    const LayerwiseSkips skips = LayerwiseSkips::of(g, c.cast_skip);
    for (const Op& op : g.ops) {
      if (!is_matrix_op(op.kind) || skips.skipping(op.name)) continue;
      if (c.cast_skip && kept_in_fp32(g, op.weight)) return true;
      if (fused_after && fused_projection(g, op)) return true;
    }
  }
  return false;
}

bool case_supported(const Case& c, const Model& m) {
  if (accumulates_f16_in_nd_ops(c, m) || layerwise_mismatch(c, m)) return false;
  return expected_supported(c) ||
         (expected_supported_base_in_fp32(c) && every_weighted_layer_kept(c, m));
}

Outcome judge_unsupported(const Case& c, const std::string* refusal, std::string& reason) {
  if (!refusal) {
    reason = "the compiled path ran " + dtypes_text(c) +
             ", which has no kernels: it must refuse it, naming the layer, both dtypes and the fix";
    return Outcome::kFailed;
  }
  if (refusal->find(dtype_name(c.policy.weight)) != std::string::npos &&
      refusal->find(dtype_name(c.policy.activation)) != std::string::npos) {
    reason = *refusal;
    return Outcome::kUnsupported;
  }
  reason =
      "the compiled path refused " + dtypes_text(c) + " without naming both dtypes: " + *refusal;
  return Outcome::kFailed;
}

namespace {

// Whether a stored value broke the numerics contract: no precision fixes that.
bool breaks_contract(const Evaluation& e) {
  return std::any_of(e.checkpoints.begin(), e.checkpoints.end(),
                     [](const CheckpointRecord& r) { return r.contract.violations > 0; });
}

CaseResult run_case_as_written(const Case& c, const RunOptions& o, ModelCache& models) {
  CaseResult r;
  r.id = c.id();
  r.seed = c.seed();
  r.repro = case_repro(c, o.device, cuda_choice(c, o));
  r.device = compiled::device_report_name(o.device);
  auto finish = [&](Outcome outcome, std::string reason) {
    r.outcome = outcome;
    r.reason = std::move(reason);
    return r;
  };
  if (!c.stream.empty()) return run_stream_case(c, o, models, std::move(r));
  Outcome refusal = Outcome::kError;
  auto prepared = prepare_case(c, o, models, refusal);
  if (!prepared.ok()) return finish(refusal, prepared.error().message());
  const PreparedCase& p = *prepared;
  r.provenance = input_provenance(p.input);
  if (r.provenance.found) return finish(Outcome::kError, r.provenance.detail);

  // Unsupported dtype combinations must be refused, with a sentence naming the dtypes; supported
  // ones must run.
  const bool supported = case_supported(c, *p.model);
  if (!p.policy_refusal.empty())
    return supported ? finish(Outcome::kFailed, "the compiled path refused " + dtypes_text(c) +
                                                    ", which it should run: " + p.policy_refusal)
                     : finish(Outcome::kUnsupported, p.policy_refusal);
  auto run = run_compiled(p, p.session.policy, true);
  if (!supported) {
    std::string reason;
    const Outcome outcome =
        judge_unsupported(c, run.ok() ? nullptr : &run.error().message(), reason);
    return finish(outcome, reason);
  }
  if (!run.ok()) {  // an invalid plan is the compiled path's bug, caught: the case fails
    return finish(compiled::is_invalid_plan(run.error()) ? Outcome::kFailed : Outcome::kError,
                  "compiled path: " + run.error().message());
  }
  r.compiled_seconds = run->seconds;
  r.plan_stats = compiled::describe_session(*run->session);
  auto ref = run_reference(p, checkpoint_values(*run->session));
  if (!ref.ok()) return finish(Outcome::kError, "reference path: " + ref.error().message());
  r.reference_seconds = ref->seconds;
  // Paths that tiled differently (a wrong engage decision) made calls the other did not, or
  // calls of the same name on other shapes: those calls' groups have nothing to compare with,
  // and the tiling check names the cause.
  run->groups.erase(
      std::remove_if(run->groups.begin(), run->groups.end(),
                     [&](const GroupCapture& g) { return !same_call(*ref, *run, g); }),
      run->groups.end());

  Evaluation e = evaluate(p, *ref, *run, o.local_error && p.captures_groups(), o.contract);
  for (const compiled::Plan* plan : run->session->plans()) {
    std::vector<ContractRow> rows = compiled::plan_contract_rows(*plan);
    r.plans.push_back({plan->graph->name + " " + shape_string(plan->capacity_shape),
                       int64_t(plan->groups.size()), plan->stats.arena_bytes,
                       int64_t(rows.size())});
    r.contract.insert(r.contract.end(), rows.begin(), rows.end());
  }
  if (p.tiling.enabled || !run->session->tiling().empty()) {
    TilingCheck t = check_tiling(p, *run);
    e.checkpoints.insert(e.checkpoints.end(), t.records.begin(), t.records.end());
    if (!t.failure.empty()) {  // the cause, ahead of the output difference it makes
      e.reason = t.failure;
      e.failed = true;
    }
  }
  if (!e.failed) {
    std::string why = check_isolation(p, *run);
    if (why.empty() && c.reload) why = check_plan_reload(p);
    if (why.empty() && c.interleave) why = check_interleaved(p, *run);
    if (!why.empty()) {
      e.failed = true;
      e.reason = why;
    }
  }
  r.checkpoints = e.checkpoints;
  r.degenerate_reference = e.degenerate_reference;
  if (e.non_finite) {
    r.provenance = locate_non_finite(p, *ref, *run);
    if (r.provenance.found && r.provenance.group >= 0 && !o.repro_file.empty()) {
      const Status written = write_group_repro(o.repro_file, p, *run, r.provenance);
      r.repro_file = written.ok() ? o.repro_file : "";
      if (!written.ok())
        r.provenance.detail += " (repro not written: " + written.error().message() + ")";
    }
  }
  if (e.failed) {
    r.outcome = Outcome::kFailed;
    r.reason = e.reason;
    if (r.provenance.found) r.reason = "first non-finite value: " + r.provenance.detail;
    if (o.search && breaks_contract(e)) {
      r.searched = true;
      r.search_note =
          "not searched: the case breaks the numerics contract (a stored value no correct "
          "rounding gives), a kernel bug that keeping layers in fp32 would only hide";
    } else if (o.search) {
      const SearchResult s = search_keep_fp32(p, *ref, *run, e, r.provenance);
      r.searched = true;
      r.keep_fp32 = s.keep_fp32;
      r.search_note = s.note;
      r.search_runs = s.runs;
    }
  } else if (e.mistrusted) {
    r.outcome = Outcome::kMistrusted;
    r.reason = e.mistrust_reason;
  } else {
    r.outcome = Outcome::kPassed;
    r.reason = "every checkpoint within tolerance" +
               (p.capture_note.empty() ? "" : " (" + p.capture_note + ")");
  }
  add_dumps(r, o, *ref, *run);
  return r;
}

// "1/4, 4, 1/16, 16": the scales as a reader writes them.
std::string scale_list(const double* scales, std::size_t n) {
  std::string text;
  for (std::size_t i = 0; i < n; ++i)
    text += (i ? ", " : "") + (scales[i] < 1 ? "1/" + printf_numbers("%.9g", 1 / scales[i])
                                             : printf_numbers("%.9g", scales[i]));
  return text;
}

}  // namespace

CaseResult search_input(const Case& c, CaseResult first,
                        const std::function<CaseResult(const Case&)>& run) {
  std::vector<std::pair<Case, std::string>> tries;  // the changed case, and how it changed
  std::vector<std::string> tried;
  if (const std::optional<double> sigma = normal_sigma(c.input)) {
    for (double k : kInputScales) {
      Case scaled = c;
      scaled.input = "normal*" + printf_numbers("%.9g", *sigma * k);
      tries.emplace_back(
          scaled, "input scaled by " + printf_numbers("%.9g", k) + " (input=" + scaled.input + ")");
    }
    tried.push_back("the input scales " + scale_list(kInputScales, std::size(kInputScales)));
  }
  if (!c.tie_weights && c.weight_scale == 1) {  // weights=ties keeps its exact ties
    for (double k : kWeightScales) {
      Case scaled = c;
      scaled.weight_scale = k;
      tries.emplace_back(scaled, "weights scaled by " + printf_numbers("%.9g", k) + " (weights=*" +
                                     printf_numbers("%.9g", k) + ")");
    }
    tried.push_back("the weight scales " + scale_list(kWeightScales, std::size(kWeightScales)));
  }
  if (tries.empty()) return first;
  for (const auto& [scaled, how] : tries) {
    CaseResult r = run(scaled);
    if (r.degenerate_reference) continue;
    r.input_search = how;
    r.reason +=
        "; input search: the reference output was constant or non-finite on the case "
        "as written, so it ran with its " +
        how;
    r.id = first.id;
    return r;
  }
  const std::string all = tried.size() == 1 ? tried[0] : tried[0] + " and " + tried[1];
  first.input_search = "none of " + all + " helped";
  first.reason +=
      "; input search: the reference output is constant or non-finite on the case "
      "as written and with " +
      all;
  return first;
}

CaseResult run_case(const Case& c, const RunOptions& o, ModelCache& models) {
  CaseResult r = run_case_as_written(c, o, models);
  if (r.degenerate_reference && is_random_config_name(c.model))
    r = search_input(c, std::move(r),
                     [&](const Case& scaled) { return run_case_as_written(scaled, o, models); });
  if (!c.expect_failure) return r;
  // expect=failed, as a test runner's expected failure: the verdict is inverted, its reason kept.
  if (r.outcome == Outcome::kFailed) {
    r.outcome = Outcome::kPassed;
    r.reason = "failed as expected (expect=failed): " + r.reason;
  } else if (r.outcome == Outcome::kPassed || r.outcome == Outcome::kMistrusted) {
    r.reason = "expected to fail (expect=failed), but " + std::string(outcome_name(r.outcome)) +
               ": " + r.reason;
    r.outcome = Outcome::kFailed;
  }
  return r;
}

}  // namespace tp
