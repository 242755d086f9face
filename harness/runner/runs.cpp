#include "harness/runner/runs.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "compiled/describe_session.h"
#include "harness/runner/shape_executor.h"
#include "reference/executor.h"

namespace tp {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string unscoped(const std::string& checkpoint) {
  const std::size_t slash = checkpoint.rfind('/');
  return slash == std::string::npos ? checkpoint : checkpoint.substr(slash + 1);
}

const std::string& ScopedExecutor::enter(const Graph& graph) {
  int& call = calls_[part_ + graph.name];
  std::string& scope = scopes_[graph.name];
  scope = part_ + (tiles_ ? "tile" + std::to_string(call) + "/"
                          : family_.call_scope(pipeline_, graph.name, call));
  ++call;
  return scope;
}

const std::string& ScopedExecutor::scope_of(const std::string& graph) const {
  static const std::string kNone;
  auto it = scopes_.find(graph);
  return it == scopes_.end() ? kNone : it->second;
}

Expected<NamedTensors> ScopedExecutor::run(const Graph& graph, const Weights& weights,
                                           const NamedTensors& inputs) {
  const std::string& scope = enter(graph);
  if (on_call_) on_call_(scope, graph, inputs);
  return inner_.run(graph, weights, inputs);
}

Expected<NamedTensors> ScopedExecutor::run_chained(const Graph& first, const Graph& second,
                                                   const Weights& weights,
                                                   const NamedTensors& inputs,
                                                   const std::string& handoff) {
  const std::string& scope = enter(first);
  if (on_call_) on_call_(scope, first, inputs);
  enter(second);  // reads `first`'s output in place: no inputs of its own to report
  return inner_.run_chained(first, second, weights, inputs, handoff);
}

Expected<ReferenceRun> run_reference(const PreparedCase& p,
                                     const std::map<std::string, std::vector<int>>& wanted) {
  ReferenceRun r;
  std::string scope;  // of the call the runner is given next
  FunctionExecutor plain(
      [&](const Graph& g, const Weights& w, const NamedTensors& in) -> Expected<NamedTensors> {
        auto it = wanted.find(g.name);
        if (it == wanted.end() || !p.captures_groups())
          return ref::run_graph(g, w, in, p.reference);
        const std::set<int> want(it->second.begin(), it->second.end());
        std::map<int, Tensor>& store = r.values[call_key(scope, g.name)];
        for (const auto& [name, id] : g.inputs)
          if (const Tensor* t = find_tensor(in, name)) store[id] = t->to(p.reference);
        return ref::run_graph(g, w, in, p.reference, [&](const Op& op, const Tensor& value) {
          if (want.count(op.output)) store[op.output] = value;  // a copy: the run goes on unchanged
        });
      });
  ScopedExecutor executor(
      plain, p.model->family(), p.pipeline,
      [&](const std::string& s, const Graph&, const NamedTensors&) { scope = s; },
      p.tiling.enabled);
  // A chained pipeline's first-graph outputs, as the compiled side reports them (run_compiled
  // with capture): from the family where it gives them (a tiled one's are blended), else from
  // the captured values of an untiled run.
  const std::optional<Handoff>& handoff = p.descriptor().handoff;
  const auto start = std::chrono::steady_clock::now();
  TP_ASSIGN_OR_RETURN(r.outputs, run_model(*p.model, p.pipeline, p.inputs(), executor,
                                           p.options(handoff.has_value())));
  r.seconds = seconds_since(start);
  if (handoff && !p.tiling.enabled)
    if (auto values = r.values.find(handoff->first); values != r.values.end())
      for (const Graph& g : p.model->family().graphs(*p.model->config))
        if (g.name == handoff->first)
          for (const auto& [name, id] : g.outputs)
            if (auto v = values->second.find(id);
                v != values->second.end() && !find_tensor(r.outputs, handoff->prefix + name))
              r.outputs.emplace_back(handoff->prefix + name, v->second);
  return r;
}

Expected<std::unique_ptr<compiled::Session>> new_compiled_session(
    const PreparedCase& p, compiled::SessionOptions options) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Backend> backend,
                      compiled::make_backend(p.device, p.cuda));
  return std::make_unique<compiled::Session>(std::move(options), std::move(backend));
}

Expected<CompiledRun> run_compiled(const PreparedCase& p, const compiled::DTypePolicy& policy,
                                   bool capture, std::unique_ptr<compiled::Session> session) {
  CompiledRun run;
  if (session) {
    run.session = std::move(session);
  } else {
    compiled::SessionOptions options = p.session;
    options.policy = policy;
    TP_ASSIGN_OR_RETURN(run.session, new_compiled_session(p, options));
  }
  if (p.warm) {
    auto warm = run_model(*p.warm, p.pipeline, p.inputs(), *run.session, p.options());
    if (!warm.ok()) return Error("warm=" + p.c.warm + ": " + warm.error().message());
  }
  const bool watch = capture && p.captures_groups();
  ScopedExecutor executor(
      *run.session, p.model->family(), p.pipeline,
      [&](const std::string& scope, const Graph& g, const NamedTensors& in) {
        if (watch) run.call_inputs[call_key(scope, g.name)] = in;
      },
      p.tiling.enabled);
  if (watch)
    run.session->watch([&run, &executor](const compiled::Plan& plan, int group,
                                         const NamedTensors& stored) {
      run.groups.push_back(GroupCapture{&plan, group, stored, executor.scope_of(plan.graph->name)});
    });
  const auto start = std::chrono::steady_clock::now();
  auto outputs = run_model(*p.model, p.pipeline, p.inputs(), executor, p.options(capture));
  run.seconds = seconds_since(start);
  run.session->watch({});
  if (!outputs.ok()) return outputs.error();
  run.outputs = std::move(outputs).value();
  return run;
}

Expected<int64_t> compile_pipeline_plans(compiled::Session& s, const Model& m,
                                         const std::string& pipeline, const NamedTensors& inputs,
                                         const PipelineOptions& options) {
  const Shape& input = inputs.front().second.shape();
  auto staged = m.family().stages(m, pipeline, input);
  if (!staged.ok()) {
    // Each graph the pipeline calls compiled, answered with zeros, without running a kernel;
    // the calls run one at a time (the session evicts idle arenas), so the largest must fit.
    int64_t largest = 0;
    ShapeExecutor planning([&](const Graph& graph, const Weights& weights,
                               const std::map<std::string, Shape>& shapes) -> Status {
      std::vector<Shape> others;
      for (std::size_t i = 1; i < graph.inputs.size(); ++i)
        others.push_back(shapes.at(graph.inputs[i].first));
      TP_ASSIGN_OR_RETURN(const compiled::Plan* plan,
                          s.plan_for(graph, weights, shapes.at(graph.inputs[0].first), others));
      largest = std::max(largest, plan->stats.arena_bytes);
      return Status();
    });
    if (auto planned = run_model(m, pipeline, inputs, planning, options); !planned.ok())
      return planned.error();
    return largest;
  }
  std::vector<Stage> stages = std::move(staged).value();
  int64_t bytes = 0;  // the stages are co-resident
  std::vector<Shape> previous;
  const Graph* previous_graph = nullptr;
  for (const Stage& stage : stages) {
    Shape shape = stage.input;
    if (!stage.from.empty()) {
      for (const auto& [name, id] : previous_graph->outputs)
        if (name == stage.from) shape = previous[std::size_t(id)];
    }
    // A graph's inputs after its first, at the shapes of the pipeline's inputs of those names.
    std::vector<Shape> others;
    for (std::size_t i = 1; i < stage.graph.inputs.size(); ++i) {
      const Tensor* t = find_tensor(inputs, stage.graph.inputs[i].first);
      if (!t)
        return Error(stage.graph.name + " reads " + stage.graph.inputs[i].first +
                     ", which the pipeline's inputs do not hold");
      others.push_back(t->shape());
    }
    TP_ASSIGN_OR_RETURN(const compiled::Plan* plan,
                        s.plan_for(stage.graph, m.weights, shape, others));
    bytes += plan->stats.arena_bytes;
    TP_ASSIGN_OR_RETURN(previous, compiled::infer_shapes(stage.graph, shape, others));
    previous_graph = &stage.graph;
  }
  return bytes;
}

std::map<std::string, std::vector<int>> checkpoint_values(const compiled::Session& session) {
  std::map<std::string, std::vector<int>> out;
  for (const compiled::Plan* plan : session.plans()) {
    std::vector<int>& v = out[plan->graph->name];
    for (const compiled::Group& g : plan->groups) {
      v.insert(v.end(), g.inputs.begin(), g.inputs.end());
      v.insert(v.end(), g.outputs.begin(), g.outputs.end());
      // A ReLU's input inside a group, for its conditioning (ValuePath::relu_conditioning).
      for (int o : g.ops)
        if (const Op& op = plan->graph->ops[std::size_t(o)]; op.kind == OpKind::kRelu)
          v.push_back(op.inputs[0]);
    }
  }
  return out;
}

std::map<int, Tensor> compiled_group_inputs(const PreparedCase& p, const CompiledRun& run,
                                            const GroupCapture& g) {
  // The latest stored value of `v` in `plan`'s call `scope` before group `before`.
  auto stored = [&](const compiled::Plan* plan, const std::string& scope, int v,
                    const GroupCapture* before) -> const Tensor* {
    const Tensor* found = nullptr;
    for (const GroupCapture& c : run.groups) {
      if (&c == before) break;
      if (c.plan != plan || c.scope != scope) continue;
      const compiled::Group& grp = plan->groups[std::size_t(c.group)];
      for (std::size_t i = 0; i < grp.outputs.size(); ++i)
        if (grp.outputs[i] == v) found = &c.stored[i].second;
    }
    return found;
  };
  std::map<int, Tensor> values;
  const compiled::Plan& plan = *g.plan;
  auto given = run.call_inputs.find(g.key());
  for (int v : plan.groups[std::size_t(g.group)].inputs) {
    if (const Tensor* t = stored(&plan, g.scope, v, &g)) {
      values[v] = *t;
      continue;
    }
    // A graph input: what the pipeline gave this call (a denoising step's latents).
    std::string name;
    for (const auto& [n, id] : plan.graph->inputs)
      if (id == v) name = n;
    if (given != run.call_inputs.end())
      if (const Tensor* t = find_tensor(given->second, name)) {
        values[v] = *t;
        continue;
      }
    // The graph's input: the pipeline input, or in a chained pipeline (a roundtrip) the second
    // graph's input, which the first graph's plan stored.
    const Tensor* handoff = nullptr;
    const std::optional<Handoff>& chain = p.descriptor().handoff;
    if (chain && plan.graph->name == chain->second)
      for (const GroupCapture& c : run.groups)
        if (c.plan->graph->name == chain->first)
          for (const auto& [output, id] : c.plan->graph->outputs)
            if (output == chain->output)
              if (const Tensor* t = stored(c.plan, c.scope, id, nullptr)) handoff = t;
    // A graph input by name among the pipeline's other inputs (a UNet's timestep, context).
    const Tensor* other = find_tensor(p.other_inputs, name);
    values[v] = handoff ? *handoff : other ? *other : p.input;
  }
  return values;
}

Shape plan_input_shape(const ReferenceRun& ref, const GroupCapture& g) {
  return ref.values.at(g.key()).at(g.plan->graph->inputs[0].second).shape();
}

Expected<std::unique_ptr<compiled::Session>> plan_case(const Case& c, ModelCache& models) {
  Outcome refusal = Outcome::kError;
  RunOptions plans_only;  // nothing of the case's size is allocated: no budget to hold
  plans_only.check_memory = false;
  TP_ASSIGN_OR_RETURN(PreparedCase p, prepare_case(c, plans_only, models, refusal));
  if (!p.policy_refusal.empty()) return Error(p.policy_refusal);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Session> session,
                      new_compiled_session(p, p.session));
  auto planned = compile_pipeline_plans(*session, *p.model, p.pipeline, p.inputs(), p.options());
  if (!planned.ok()) return planned.error();
  return session;
}

}  // namespace tp
