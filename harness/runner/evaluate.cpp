// Comparison and verdict for one compiled run against the reference: every captured checkpoint
// (accumulated error, and local error: the group alone on the reference's inputs), then the
// pipeline outputs, each against its line of the tolerance table.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>

#include "harness/core/format.h"
#include "harness/core/rng.h"
#include "harness/core/shapes.h"
#include "harness/runner/chained_output.h"
#include "harness/runner/group_paths.h"
#include "harness/runner/matrix_conditioning.h"
#include "harness/runner/rounding_noise.h"
#include "harness/runner/runs.h"
#include "harness/runner/tolerance.h"

namespace tp {
namespace {

// Applies `tol` to `m`; returns why it fails, or "" when it passes.
std::string judge(const Metrics& m, const Tolerance& tol) {
  if (m.non_finite_new > 0)
    return std::to_string(m.non_finite_new) + " non-finite values where the reference is finite";
  if (m.rel_l2 > tol.rel_l2)
    return printf_numbers("rel L2 %.3g > %.3g", m.rel_l2, tol.rel_l2) + " (" + tol.basis + ")";
  const double element = m.want_max_abs > 0 ? m.max_abs / m.want_max_abs : m.max_abs;
  if (element > tol.max_element) {
    std::string where = m.worst.empty() ? "" : " at " + format_index(m.worst[0].index);
    return printf_numbers("worst element off by %.3g of max|ref| > %.3g", element,
                          tol.max_element) +
           where;
  }
  return "";
}

// The reason a stored value breaks the numerics contract: how many elements, which way when the
// violations are one-sided ("biased rounding"), the first.
std::string contract_breach(const ContractMetrics& m, DType stored) {
  const bool biased = biased_rounding(m);
  const bool down = 2 * m.toward_zero > m.violations;
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "%s: %lld of %lld elements %soutside what a correct %s store admits (up to %.3g "
                "ulps past it); first at %s: stored %.9g, admitted [%.9g, %.9g]",
                biased ? "biased rounding" : "breaks the numerics contract",
                static_cast<long long>(m.violations),
                static_cast<long long>(m.decided + m.ambiguous),
                biased ? (down ? "stored toward zero, " : "stored away from zero, ") : "",
                dtype_name(stored), m.worst_ulps, format_index(m.first).c_str(), m.got, m.lo, m.hi);
  return buf;
}

void set_tolerance(CheckpointRecord& rec, const Tolerance& tol) {
  rec.tolerance_rel_l2 = tol.rel_l2;
  rec.tolerance_max_element = tol.max_element;
  rec.tolerance_basis = tol.basis;
}

bool constant(const Tensor& t, double& value) {
  const Tensor f = t.to(DType::kF64);
  const double* d = f.data<double>();
  bool seen = false;
  double lo = 0, hi = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (!std::isfinite(d[i])) continue;
    lo = seen ? std::min(lo, d[i]) : d[i];
    hi = seen ? std::max(hi, d[i]) : d[i];
    seen = true;
  }
  value = lo;
  return seen && lo == hi;
}

// The bound an output gets from draw `draw` of the Monte Carlo rounding estimate
// (rounding_noise.h), computed only when the quadrature rule fails it; `draws` names how many
// draws the bound is the largest of.
using RoundingBound = std::function<Expected<Tolerance>(int draw, int draws)>;

// Why `m` fails `tol`, or ""; where the quadrature rule fails it and `rounding` is given, `tol`
// becomes the rounding estimate's bound when that is larger, from up to kRoundingDraws draws
// (the next one only while the largest so far fails it), and `estimated` is set.
std::string judge_output_error(const Metrics& m, Tolerance& tol, const RoundingBound& rounding,
                               bool& estimated) {
  std::string why = judge(m, tol);
  if (why.empty() || !rounding || m.non_finite_new > 0) return why;
  double largest = 0;
  for (int draw = 0; draw < kRoundingDraws && !why.empty(); ++draw) {
    Expected<Tolerance> estimate = rounding(draw, draw + 1);
    if (!estimate.ok())
      return why + "; the Monte Carlo rounding estimate failed: " + estimate.error().message();
    largest = std::max(largest, estimate->rel_l2);
    if (estimate->rel_l2 < largest || estimate->rel_l2 <= tol.rel_l2) {
      if (draw == 0) return why;  // the quadrature rule's bound is the larger
      continue;
    }
    tol = std::move(estimate).value();
    estimated = true;
    why = judge(m, tol);
  }
  return why;
}

// Marks the case mistrusted where the rounding estimate put an output's bound at a relative L2
// of 1 or more: it measured that the model's gain takes this policy's roundings to an error as
// large as the output (an all-zero output is at 1), so agreeing within it proves nothing. (The
// quadrature rule's bound can reach 1 too, for fp8 e5m2 weights, but that is the rule's a priori
// sum over the groups, each of which is still judged alone.)
void mistrust_if_vacuous(const std::string& label, const Tolerance& tol, bool estimated,
                         Evaluation& e) {
  if (!estimated || tol.rel_l2 < 1 || e.mistrusted) return;
  e.mistrusted = true;
  e.mistrust_reason = label + "'s bound is a relative L2 of " + printf_numbers("%.3g", tol.rel_l2) +
                      " (" + tol.basis +
                      "): the model amplifies this policy's roundings to errors as large as "
                      "its output, so agreeing within it proves nothing; judge this model at a "
                      "finer policy (f16 or f32) or on other weights";
}

// A denoising loop's steps: each later call of a graph with weights (the UNet) run alone on the
// reference trajectory's inputs of that call, beside the compiled trajectory's own output. The
// step where error is made stands out from the steps that only carry it.
void step_local_errors(const PreparedCase& p, const ReferenceRun& ref, CompiledRun& run,
                       const Tolerance& out_tol, const RoundingNoise& noise, Evaluation& e) {
  if (p.tiling.enabled) return;  // tiles are not steps: their groups are judged one by one
  for (const auto& [key, given] : run.call_inputs) {
    const std::string graph_name = unscoped(key);
    const compiled::Plan* plan = nullptr;  // the one this call ran
    for (const GroupCapture& g : run.groups)
      if (!plan && g.key() == key) plan = g.plan;
    const auto want = ref.values.find(key);
    if (graph_name == key || !plan || plan->graph->params.empty() || want == ref.values.end())
      continue;
    const Graph& graph = *plan->graph;
    const std::string scope = key.substr(0, key.size() - graph_name.size());
    NamedTensors inputs;
    for (const auto& [name, id] : graph.inputs) inputs.emplace_back(name, want->second.at(id));
    auto alone = run.session->run(graph, p.model_of(graph.name, scope).weights, inputs);
    if (!alone.ok()) {
      e.failed = true;
      if (e.reason.empty())
        e.reason = scope + graph_name +
                   ": running the step alone on the reference's inputs "
                   "failed: " +
                   alone.error().message();
      continue;
    }
    for (const auto& [name, id] : graph.outputs) {
      const Tensor* got = find_tensor(*alone, name);
      const Tensor* trajectory = nullptr;  // the compiled run's own value of this call
      for (const GroupCapture& g : run.groups)
        if (g.key() == key)
          for (std::size_t i = 0; i < g.stored.size(); ++i)
            if (g.plan->groups[std::size_t(g.group)].outputs[i] == id)
              trajectory = &g.stored[i].second;
      if (!got || !trajectory) continue;
      CheckpointRecord rec;
      rec.name = scope + graph_name + ":" + name;
      rec.graph = graph_name;
      rec.op_class = op_class_name(OpClass::kOutput);
      rec.dtype = dtype_name(got->dtype());
      auto accumulated = compare_tensors(*trajectory, want->second.at(id), got->dtype());
      auto lm = compare_tensors(*got, want->second.at(id), got->dtype());
      if (!accumulated.ok() || !lm.ok()) continue;
      rec.accumulated = std::move(accumulated).value();
      rec.has_local = true;
      rec.local = std::move(lm).value();
      Tolerance tol = out_tol;
      // The estimate: this call alone, noisy (structured bindings are not captured in C++17).
      const RoundingBound rounding = [&, output = name, value = id, call = key](
                                         int draw, int draws) -> Expected<Tolerance> {
        TP_ASSIGN_OR_RETURN(
            NamedTensors noisy,
            noisy_graph(graph, p.model_of(graph.name, scope).weights, inputs, noise, p.reference,
                        draw_seed(p.c.seed() ^ hash_name(call), draw)));
        const Tensor* t = find_tensor(noisy, output);
        if (!t) return Error("the noisy run has no output " + output);
        return rounding_tolerance(*t, want->second.at(value), draws);
      };
      bool estimated = false;
      const std::string why = judge_output_error(rec.local, tol, rounding, estimated);
      set_tolerance(rec, tol);
      mistrust_if_vacuous(rec.name, tol, estimated, e);
      if (!why.empty()) {
        rec.passed = false;
        if (!e.failed)
          e.reason = rec.name +
                     ": local error (the step alone on the reference's "
                     "trajectory): " +
                     why;
        e.failed = true;
      }
      e.checkpoints.push_back(std::move(rec));
    }
  }
}

// A denoising loop's latents as each step stored them: the step's record among the checkpoints.
struct StepPoint {
  int step = 0;
  std::size_t record = 0;
};

// The step a call scope names ("step3/", "refiner/step3/"), with the part before it; -1 when the
// scope is not a step's.
int scope_step(const std::string& scope, std::string& part) {
  if (scope.size() < 6 || scope.back() != '/') return -1;
  std::size_t digits = scope.size() - 1;
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(scope[digits - 1]))) --digits;
  if (digits == scope.size() - 1 || digits < 4 || scope.compare(digits - 4, 4, "step") != 0)
    return -1;
  part = scope.substr(0, digits - 4);
  return parse_number<int>(std::string_view(scope).substr(digits, scope.size() - 1 - digits))
      .value_or(-1);
}

// Across steps: unbiased rounding leaves the latents' mean signed error a random walk, within a
// few standard errors of zero at every step however many there are (the error's spread grows
// with it); a rounding bias adds the same shift every step, so the mean walks away from zero and
// its distance in standard errors grows with the step count. Fails when the last step's is past
// kDriftZ and the mean moved further the same way since the first step (docs/tolerances.md).
void step_drift(const std::map<std::string, std::vector<StepPoint>>& trajectories, Evaluation& e) {
  for (const auto& [part, points] : trajectories) {
    if (points.size() < 2) continue;
    const Metrics& first = e.checkpoints[points.front().record].accumulated;
    CheckpointRecord& last = e.checkpoints[points.back().record];
    const Metrics& m = last.accumulated;
    if (m.bias_se <= 0 || m.count < 2) continue;
    const double z = m.bias_ulp / m.bias_se;
    if (std::abs(z) <= kDriftZ || std::abs(m.bias_ulp) <= std::abs(first.bias_ulp) ||
        m.bias_ulp * first.bias_ulp <= 0)
      continue;
    last.passed = false;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s: the latents' signed error grows with the steps faster than a random walk: "
                  "mean %.3g ulps %s after %zu steps (%.3g after the first), %.1f standard errors "
                  "from zero where unbiased rounding stays within %.0f",
                  last.name.c_str(), m.bias_ulp, m.bias_ulp < 0 ? "toward zero" : "away from zero",
                  points.size(), first.bias_ulp, std::abs(z), kDriftZ);
    if (!e.failed) e.reason = buf;
    e.failed = true;
  }
}

// Records the first failed check as the reason.
void fail(Evaluation& e, const std::string& why) {
  if (!e.failed) e.reason = why;
  e.failed = true;
}

// One captured group of a compiled run, judged: its stored outputs against the reference's
// values (accumulated error), the group run alone on the reference's inputs (local error) and
// the numerics contract.
class GroupJudge {
 public:
  GroupJudge(const PreparedCase& p, const ReferenceRun& ref, CompiledRun& run, bool local,
             const ContractChecker& contract, Evaluation& e)
      : p_(p), ref_(ref), run_(run), local_(local), contract_(contract), e_(e) {}

  void check(const GroupCapture& g) {
    const compiled::Plan& plan = *g.plan;
    const compiled::Group& grp = plan.groups[std::size_t(g.group)];
    const std::map<int, Tensor>& want = ref_.values.at(g.key());
    auto [shapes, fresh] = shapes_by_call_.try_emplace(g.key());
    if (fresh) shapes->second = call_shapes(plan, want);
    const ValuePath path =
        group_path(plan, grp, want, shapes->second, p_.reference, p_.descriptor().train_timesteps);
    const Tolerance tol = local_tolerance(class_of(plan, grp), path);
    bool measured = false;  // the conditioning, measured at the first failure
    std::optional<Tolerance> conditioned;
    const auto with_conditioning = [&] {
      if (!measured) conditioned = conditioned_tolerance(g, want, path);
      measured = true;
      return conditioned;
    };
    const std::vector<Tensor> alone = run_alone(g, want);
    const std::vector<ContractInterval> admitted = admitted_by_contract(g);
    std::string part;
    const int step = scope_step(g.scope, part);
    for (std::size_t i = 0; i < grp.outputs.size(); ++i) {
      CheckpointRecord rec = record(g, i, tol);
      const int v = grp.outputs[i];
      const DType stored = plan.buffers.at(v).dtype;
      auto m = compare_tensors(g.stored[i].second, want.at(v), stored);
      if (!m.ok()) {
        rec.passed = false;
        fail(e_, rec.name + ": " + m.error().message());
        e_.checkpoints.push_back(std::move(rec));
        continue;
      }
      rec.accumulated = std::move(m).value();
      if (step >= 0 && is_trajectory(plan, v))
        trajectories_[part].push_back({step, e_.checkpoints.size()});  // pushed below
      if (rec.accumulated.non_finite_new > 0) {
        rec.passed = false;
        e_.non_finite = true;
        fail(e_, rec.name + ": " + std::to_string(rec.accumulated.non_finite_new) +
                     " non-finite values where the reference is finite");
      }
      if (i < alone.size()) judge_local(rec, alone[i], want.at(v), stored, tol, with_conditioning);
      if (i < admitted.size()) judge_contract(rec, g.stored[i].second, admitted[i], stored);
      e_.checkpoints.push_back(std::move(rec));
    }
  }

  // The loops' trajectories, each in step order.
  std::map<std::string, std::vector<StepPoint>>& trajectories() {
    for (auto& [part, points] : trajectories_)
      std::sort(points.begin(), points.end(),
                [](const StepPoint& a, const StepPoint& b) { return a.step < b.step; });
    return trajectories_;
  }

 private:
  // The group alone on the reference's inputs (local error), or nothing.
  std::vector<Tensor> run_alone(const GroupCapture& g, const std::map<int, Tensor>& want) {
    if (!local_) return {};
    const compiled::Group& grp = g.plan->groups[std::size_t(g.group)];
    std::map<int, Tensor> inputs;
    for (int v : grp.inputs) inputs[v] = want.at(v);
    auto r = run_.session->run_group(*g.plan, g.group, plan_input_shape(ref_, g), inputs);
    if (r.ok()) return std::move(r).value();
    fail(e_,
         g.scope + grp.checkpoints[0] + ": running the group alone failed: " + r.error().message());
    return {};
  }

  // What the contract admits for each stored output, or nothing (no checker, or a group too
  // large for it).
  std::vector<ContractInterval> admitted_by_contract(const GroupCapture& g) {
    const compiled::Plan& plan = *g.plan;
    const compiled::Group& grp = plan.groups[std::size_t(g.group)];
    // The group's size from its buffers (capacity shapes, an upper bound) before its inputs are
    // copied out of the capture.
    int64_t elements = 0;
    for (int v : grp.inputs)
      if (auto b = plan.buffers.find(v); b != plan.buffers.end())
        elements += shape_numel(b->second.shape);
    for (const auto& [name, t] : g.stored) elements += t.numel();
    if (!contract_ || elements > kContractMaxElements) return {};
    auto c = contract_(*plan.graph, compiled::group_contract(plan, g.group),
                       p_.model_of(plan.graph->name, g.scope).weights,
                       compiled_group_inputs(p_, run_, g));
    if (c.ok()) return std::move(c).value();
    fail(e_, g.scope + grp.checkpoints[0] + ": the contract check failed: " + c.error().message());
    return {};
  }

  CheckpointRecord record(const GroupCapture& g, std::size_t i, const Tolerance& tol) const {
    const compiled::Plan& plan = *g.plan;
    const compiled::Group& grp = plan.groups[std::size_t(g.group)];
    CheckpointRecord rec;
    rec.name = g.scope + grp.checkpoints[i];
    rec.graph = plan.graph->name;
    rec.group = g.group;
    rec.op_class = op_class_name(class_of(plan, grp));
    rec.dtype = dtype_name(plan.buffers.at(grp.outputs[i]).dtype);
    set_tolerance(rec, tol);
    return rec;
  }

  // Whether value `v` is the output a denoising loop's trajectory is made of.
  bool is_trajectory(const compiled::Plan& plan, int v) const {
    if (!p_.descriptor().denoising) return false;
    for (const auto& [name, id] : plan.graph->outputs)
      if (id == v && name == p_.descriptor().denoising->trajectory) return true;
    return false;
  }

  // The local tolerance with the group's conv and linear conditioning (ValuePath::
  // matrix_conditioning) on the reference's inputs, where it is above 1; else nothing.
  std::optional<Tolerance> conditioned_tolerance(const GroupCapture& g,
                                                 const std::map<int, Tensor>& want,
                                                 ValuePath path) const {
    const compiled::Plan& plan = *g.plan;
    const compiled::Group& grp = plan.groups[std::size_t(g.group)];
    const GroupConditioning k = group_conditioning(
        *plan.graph, grp.ops, p_.model_of(plan.graph->name, g.scope).weights, want);
    path.matrix_conditioning = k.matrix;
    path.layer_norm_conditioning = k.layer_norm;
    if (k.matrix <= 1 && k.layer_norm <= 1) return std::nullopt;
    return local_tolerance(class_of(plan, grp), path);
  }

  void judge_local(CheckpointRecord& rec, const Tensor& alone, const Tensor& want, DType stored,
                   const Tolerance& tol,
                   const std::function<std::optional<Tolerance>()>& with_conditioning) {
    auto lm = compare_tensors(alone, want, stored);
    if (!lm.ok()) return;
    rec.has_local = true;
    rec.local = std::move(lm).value();
    std::string why = judge(rec.local, tol);
    if (why.empty()) return;
    if (auto conditioned = with_conditioning()) {
      set_tolerance(rec, *conditioned);
      why = judge(rec.local, *conditioned);
      if (why.empty()) return;
    }
    rec.passed = false;
    fail(e_, rec.name + ": local error (the layer alone on the reference's inputs): " + why);
  }

  void judge_contract(CheckpointRecord& rec, const Tensor& got, const ContractInterval& admitted,
                      DType stored) {
    auto cm = check_contract(got, admitted);
    if (!cm.ok()) return fail(e_, rec.name + ": " + cm.error().message());
    rec.contract = std::move(cm).value();
    if (rec.contract.violations == 0) return;
    rec.passed = false;
    fail(e_, rec.name + ": " + contract_breach(rec.contract, stored));
  }

  const PreparedCase& p_;
  const ReferenceRun& ref_;
  CompiledRun& run_;
  bool local_;
  const ContractChecker& contract_;
  Evaluation& e_;
  std::map<std::string, std::vector<StepPoint>> trajectories_;  // by loop (base, refiner)
  std::map<std::string, std::vector<Shape>> shapes_by_call_;
};

// Marks the case mistrusted where the reference output `want` proves nothing: constant, or
// holding non-finite values (no error is measured at those elements; the compiled side
// non-finite where the reference is finite still fails).
void mistrust_degenerate_reference(const std::string& label, const Tensor& want, const Metrics& m,
                                   Evaluation& e) {
  double value = 0;
  std::string why;
  if (m.non_finite_want > 0)
    why = "the reference " + label + " holds " + std::to_string(m.non_finite_want) +
          " non-finite values of " + std::to_string(want.numel());
  else if (constant(want, value))
    why = "the reference " + label + " is constant (every element " +
          printf_numbers("%.6g", value) + ")";
  if (why.empty()) return;
  e.degenerate_reference = true;
  if (e.mistrusted) return;
  e.mistrusted = true;
  e.mistrust_reason =
      why + ", so agreeing with it proves nothing; check the model's weights and the input";
}

// One pipeline output against the reference's, judged (a failure's reason starts with `label`);
// a constant or non-finite reference output makes the case mistrusted.
void judge_output(const std::string& label, const std::string& name, const std::string& graph,
                  const Tensor& got, const Tensor* want, Tolerance tol, Evaluation& e,
                  const RoundingBound& rounding = {}) {
  CheckpointRecord rec;
  rec.name = name;
  rec.graph = graph;
  rec.op_class = op_class_name(OpClass::kOutput);
  rec.dtype = dtype_name(got.dtype());
  set_tolerance(rec, tol);
  auto m = want ? compare_tensors(got, *want, got.dtype())
                : Expected<Metrics>(Error("the reference has no such output"));
  if (!m.ok()) {
    rec.passed = false;
    fail(e, label + ": " + m.error().message());
    e.checkpoints.push_back(std::move(rec));
    return;
  }
  rec.accumulated = std::move(m).value();
  if (rec.accumulated.non_finite_new > 0) e.non_finite = true;
  bool estimated = false;
  const std::string why = judge_output_error(rec.accumulated, tol, rounding, estimated);
  set_tolerance(rec, tol);
  mistrust_if_vacuous(label, tol, estimated, e);
  if (!why.empty()) {
    rec.passed = false;
    fail(e, label + ": " + why);
  }
  mistrust_degenerate_reference(label, *want, rec.accumulated, e);
  e.checkpoints.push_back(std::move(rec));
}

// The pipeline's outputs against the reference's, with the output tolerance. A chained
// pipeline's (harness/runner/chained_output.h): its first graph's outputs with that graph's
// bound; each final output twice, the second graph alone on the compiled handoff ("alone:")
// with its own bound, and the whole with chained_output_tolerance.
void judge_outputs(const PreparedCase& p, const ReferenceRun& ref, const CompiledRun& run,
                   const std::vector<GraphPaths>& paths, const Tolerance& out_tol,
                   const RoundingNoise& noise, Evaluation& e) {
  const std::optional<Handoff>& chain = p.descriptor().handoff;
  std::optional<Tolerance> first, second;
  Expected<ChainedParts> parts = Error("");
  if (chain) {
    // The second graph's groups, and the rest (the first graph, or its variant: a tiled
    // encoder's moments).
    const auto in_second = [&](const std::string& g) { return g == chain->second; };
    first = output_tolerance(paths_of(paths, [&](const std::string& g) { return !in_second(g); }));
    second = output_tolerance(paths_of(paths, in_second));
    parts = chained_parts(p, ref, run);
    if (!parts.ok()) fail(e, "the chained pipeline's parts: " + parts.error().message());
  }
  // Noisy reference runs (rounding_noise.h), made at most once per stage and draw when an
  // output needs one.
  std::map<std::pair<std::string, int>, Expected<NamedTensors>> noisy;
  auto rounding = [&](const PreparedCase& q, const std::string& output, const Tensor& want) {
    return [&, q, output](int draw, int draws) -> Expected<Tolerance> {
      auto it = noisy.find({q.pipeline, draw});
      if (it == noisy.end())
        it = noisy
                 .emplace(std::make_pair(q.pipeline, draw),
                          noisy_reference(q, noise, draw_seed(p.c.seed(), draw)))
                 .first;
      if (!it->second.ok()) return it->second.error();
      const Tensor* t = find_tensor(*it->second, output);
      if (!t) return Error("the noisy run has no output " + output);
      return rounding_tolerance(*t, want, draws);
    };
  };
  // The first graph's outputs first, in execution order (the first failed check is the reason).
  NamedTensors outputs;
  for (bool first_graph : {true, false})
    for (const auto& [name, got] : run.outputs)
      if ((chain && name.rfind(chain->prefix, 0) == 0) == first_graph)
        outputs.emplace_back(name, got);
  for (const auto& [name, got] : outputs) {
    const Tensor* want = find_tensor(ref.outputs, name);
    const bool staged = chain && name.rfind(chain->prefix, 0) == 0;
    if (!chain || staged || !parts.ok() || !want) {
      const RoundingBound bound = !want    ? RoundingBound()
                                  : staged ? rounding(stage_case(p, chain->first_pipeline, p.input),
                                                      name.substr(chain->prefix.size()), *want)
                                           : rounding(p, name, *want);
      judge_output("output " + name, "output:" + name, p.pipeline, got, want,
                   staged ? *first : out_tol, e, bound);
      continue;
    }
    const Tensor* got_alone = find_tensor(parts->got_alone, name);
    const Tensor* want_alone = find_tensor(parts->want_alone, name);
    if (!got_alone || !want_alone) {
      fail(e, "the chained pipeline's second stage alone has no output " + name);
      continue;
    }
    Tolerance own = *second;
    own.basis = "the compiled " + chain->second + " against the reference's on the compiled " +
                chain->output + ": " + own.basis;
    judge_output(
        chain->second + " alone, output " + name, "alone:" + name, chain->second, *got_alone,
        want_alone, own, e,
        rounding(stage_case(p, chain->second_pipeline, parts->handoff), name, *want_alone));
    const double gain = chained_gain(*parts, *want_alone, *want);
    judge_output("output " + name, "output:" + name, p.pipeline, got, want,
                 chained_output_tolerance(*first, *second, gain), e, rounding(p, name, *want));
  }
}

}  // namespace

Evaluation evaluate(const PreparedCase& p, const ReferenceRun& ref, CompiledRun& run, bool local,
                    const ContractChecker& contract) {
  Evaluation e;
  const std::vector<GraphPaths> paths = output_paths(p, ref, run);
  GroupJudge groups(p, ref, run, local, contract, e);
  for (const GroupCapture& g : run.groups) groups.check(g);
  step_drift(groups.trajectories(), e);
  const Tolerance out_tol =
      output_tolerance(paths_of(paths, [](const std::string&) { return true; }));
  const RoundingNoise noise = rounding_noise(*run.session);
  if (local) step_local_errors(p, ref, run, out_tol, noise, e);
  judge_outputs(p, ref, run, paths, out_tol, noise, e);
  return e;
}

}  // namespace tp
