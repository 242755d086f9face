// stream= cases (field report 5): resolutions in order through one compiled session, as an app
// that generates at changing sizes runs its VAE. Each step is compared with the reference like
// any case; the report counts compilations, compile time and arena memory per step. Under
// shapes=bucket:N every output must also equal the exact-shape session's; under mem=SIZE a
// step whose arenas cannot fit must be refused before allocating, with the figure it needs, and
// the session must go on serving the steps after it.
#include <chrono>
#include <map>

#include "compiled/describe_session.h"
#include "harness/core/format.h"
#include "harness/runner/runs.h"

namespace tp {
namespace {

struct StreamVerdict {
  std::string failure;  // the first failed check ("" when none)
  int refused = 0;
  std::map<std::string, int> compiled;  // plans compiled over the stream, per graph
  void fail(const std::string& why) {
    if (failure.empty()) failure = why;
  }
};

// Runs every step; a Status error is the harness failing (ERROR), a verdict failure the
// compiled path (FAILED).
Status run_steps(const Case& c, const std::vector<PreparedCase>& steps, CaseResult& r,
                 StreamVerdict& v) {
  const PreparedCase& first = steps[0];
  compiled::SessionOptions options = first.session;
  TP_ASSIGN_OR_RETURN(options.shapes, compiled::parse_shape_policy(c.shapes));
  options.memory_limit_bytes = c.memory_limit;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Session> session,
                      new_compiled_session(first, options));
  // Under bucket:N, the same stream under exact shapes and no limit: what bucketing must equal.
  std::unique_ptr<compiled::Session> exact;
  if (options.shapes.bucket) {
    compiled::SessionOptions e = first.session;
    TP_ASSIGN_OR_RETURN(exact, new_compiled_session(first, e));
  }
  CompiledRun run;
  for (const PreparedCase& p : steps) {
    StreamStep step;
    step.resolution = resolution_text(p.c.height, p.c.width);
    step.input_shape = shape_string(p.input.shape());
    const std::string at = step.resolution + ": ";
    const compiled::CacheStats before = session->stats();
    const std::size_t known = session->plans().size();
    TP_ASSIGN_OR_RETURN(step.need_bytes, compile_pipeline_plans(*session, *p.model, p.pipeline,
                                                                p.inputs(), p.options()));
    const bool must_refuse = c.memory_limit && step.need_bytes > c.memory_limit;
    const auto start = std::chrono::steady_clock::now();
    auto outputs = run_model(*p.model, p.pipeline, p.inputs(), *session, p.options());
    r.compiled_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const compiled::CacheStats& after = session->stats();
    step.compilations = after.compilations - before.compilations;
    // The plans compiled for this step, per graph (the UNet's, the VAE's, the scheduler's).
    std::map<std::string, int> per_graph;
    const std::vector<const compiled::Plan*> plans = session->plans();
    for (std::size_t i = known; i < plans.size(); ++i) ++per_graph[plans[i]->graph->name];
    for (const auto& [graph, n] : per_graph) {
      step.compiled_graphs +=
          (step.compiled_graphs.empty() ? "" : ", ") + graph + " " + std::to_string(n);
      v.compiled[graph] += n;
    }
    step.total_compilations = after.compilations;
    step.compile_seconds = after.compile_seconds - before.compile_seconds;
    step.arena_bytes = after.arena_bytes;
    step.peak_arena_bytes = after.peak_arena_bytes;
    step.evictions = after.evictions;
    if (c.memory_limit && after.peak_arena_bytes > c.memory_limit)
      v.fail(at + "the session held " + format_bytes(after.peak_arena_bytes) +
             " of arenas, over the mem=" + format_bytes(c.memory_limit) + " limit");
    if (!outputs.ok()) {
      step.note = outputs.error().message();
      step.refused = must_refuse;
      if (!must_refuse)
        v.fail(at + "the compiled path failed: " + step.note);
      else if (step.note.find("needs ") == std::string::npos)
        v.fail(at + "refused without saying how much memory it needs: " + step.note);
      v.refused += must_refuse;
      r.stream.push_back(std::move(step));
      continue;
    }
    if (must_refuse)
      v.fail(at + "ran although its arenas need " + format_bytes(step.need_bytes) +
             ", over the mem=" + format_bytes(c.memory_limit) +
             " limit: it must be refused before allocating");
    // Against the reference, as a plain case (outputs, with the tolerance of the plans that ran).
    auto ref = run_reference(p, checkpoint_values(*session));
    if (!ref.ok()) return Error(at + "reference path: " + ref.error().message());
    r.reference_seconds += ref->seconds;
    run.session =
        std::move(session);  // evaluate reads the plans from a CompiledRun; lent and taken back
    run.outputs = std::move(outputs).value();
    Evaluation e = evaluate(p, *ref, run, false);
    session = std::move(run.session);
    for (CheckpointRecord& rec : e.checkpoints) {
      rec.name += "@" + step.resolution;
      r.checkpoints.push_back(rec);
    }
    if (e.failed) v.fail(at + e.reason + " (alone: " + case_repro(p.c, p.device, p.cuda) + ")");
    if (exact) {
      auto want = run_model(*p.model, p.pipeline, p.inputs(), *exact, p.options());
      if (!want.ok()) return Error(at + "the exact-shape run: " + want.error().message());
      step.exact_compilations = exact->stats().compilations;
      const Tensor& got = run.outputs.front().second;
      auto m = compare_tensors(got, want->front().second, got.dtype());
      if (!m.ok()) return Error(at + "comparing bucketed with exact: " + m.error().message());
      step.bucket_vs_exact_max_abs = m->max_abs;
      const double tol = e.checkpoints.empty() ? 0 : e.checkpoints.front().tolerance_rel_l2;
      if (m->non_finite_new > 0 || m->rel_l2 > tol) {
        step.note = "bucketed output differs from the exact-shape output: rel L2 " +
                    format_number(m->rel_l2) + " (tolerance " + format_number(tol) + ")";
        v.fail(at + step.note);
      } else {
        step.note =
            m->max_abs == 0
                ? "bucketed output equals the exact-shape output bit for bit"
                : "bucketed output within tolerance of the exact-shape output (max |diff| " +
                      format_number(m->max_abs) + ")";
      }
    }
    r.stream.push_back(std::move(step));
  }
  r.plan_stats = compiled::describe_session(*session);
  if (exact)
    r.plan_stats += "exact-shape session for comparison:\n" + compiled::describe_session(*exact);
  return Status();
}

}  // namespace

CaseResult run_stream_case(const Case& c, const RunOptions& o, ModelCache& models, CaseResult r) {
  auto finish = [&](Outcome outcome, std::string reason) {
    r.outcome = outcome;
    r.reason = std::move(reason);
    return r;
  };
  // Each step is the plain case at its resolution: its input (and seed) are that case's, so a
  // failing step reproduces alone.
  std::vector<PreparedCase> steps;
  for (const auto& [h, w] : c.stream) {
    Case step = c;
    step.stream.clear();
    step.height = h;
    step.width = w;
    step.shapes = "exact";
    step.memory_limit = 0;
    Outcome refusal = Outcome::kError;
    auto p = prepare_case(step, o, models, refusal);
    if (!p.ok()) return finish(refusal, resolution_text(h, w) + ": " + p.error().message());
    if (!p->policy_refusal.empty()) return finish(Outcome::kUnsupported, p->policy_refusal);
    steps.push_back(std::move(p).value());
  }
  StreamVerdict v;
  const Status s = run_steps(c, steps, r, v);
  if (!case_supported(c, *steps[0].model)) {  // must be refused, as a plain case
    std::string reason;
    const Outcome outcome = judge_unsupported(c, s.ok() ? nullptr : &s.error().message(), reason);
    r.stream.clear();
    r.checkpoints.clear();
    return finish(outcome, reason);
  }
  if (!s.ok()) return finish(Outcome::kError, s.error().message());
  if (!v.failure.empty()) return finish(Outcome::kFailed, v.failure);
  const StreamStep& last = r.stream.back();
  std::string reason = std::to_string(r.stream.size() - std::size_t(v.refused)) + " of " +
                       std::to_string(r.stream.size()) + " resolutions ran within tolerance: " +
                       std::to_string(last.total_compilations) + " compilations";
  if (v.compiled.size() > 1) {  // a pipeline of several graphs: which ones recompiled
    std::string per_graph;
    for (const auto& [graph, n] : v.compiled)
      per_graph += (per_graph.empty() ? "" : ", ") + graph + " " + std::to_string(n);
    reason += " (" + per_graph + ")";
  }
  if (c.shapes != "exact")
    reason += " (" + std::to_string(last.exact_compilations) +
              " with exact shapes), outputs equal to exact shapes'";
  reason += ", arenas peaked at " + format_bytes(last.peak_arena_bytes);
  if (v.refused)
    reason += ", " + std::to_string(v.refused) +
              " refused before allocating as mem=" + format_bytes(c.memory_limit) + " requires";
  return finish(Outcome::kPassed, reason);
}

}  // namespace tp
