#include "harness/runner/runs.h"

#include <chrono>
#include <set>

#include "compiled/describe_session.h"
#include "reference/executor.h"

namespace tp {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Expected<ReferenceRun> run_reference(const PreparedCase& p,
                                     const std::map<std::string, std::vector<int>>& wanted) {
  ReferenceRun r;
  const GraphRunner runner = [&](const Graph& g, const Weights& w,
                                 const NamedTensors& in) -> Expected<NamedTensors> {
    auto it = wanted.find(g.name);
    if (it == wanted.end() || p.tiling.enabled) return ref::run_graph(g, w, in, p.reference);
    const std::set<int> want(it->second.begin(), it->second.end());
    std::map<int, Tensor>& store = r.values[g.name];
    for (const auto& [name, id] : g.inputs)
      if (const Tensor* t = find_tensor(in, name)) store[id] = t->to(p.reference);
    return ref::run_graph(g, w, in, p.reference, [&](const Op& op, const Tensor& value) {
      if (want.count(op.output)) store[op.output] = value;  // a copy: the run goes on unchanged
    });
  };
  const auto start = std::chrono::steady_clock::now();
  TP_ASSIGN_OR_RETURN(r.outputs,
                      run_model(*p.model, p.pipeline, p.inputs(), runner, {p.tiling, false}));
  r.seconds = seconds_since(start);
  // A chained pipeline's first-graph outputs, as the compiled side reports them (run_compiled
  // with capture).
  const std::optional<Handoff> handoff = p.model->family().handoff(p.pipeline);
  if (handoff && !p.tiling.enabled)
    if (auto values = r.values.find(handoff->first); values != r.values.end())
      for (const Graph& g : p.model->family().graphs(*p.model->config))
        if (g.name == handoff->first)
          for (const auto& [name, id] : g.outputs)
            if (auto v = values->second.find(id); v != values->second.end())
              r.outputs.emplace_back(handoff->prefix + name, v->second);
  return r;
}

Expected<std::unique_ptr<compiled::Session>> new_compiled_session(
    const PreparedCase& p, compiled::SessionOptions options) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Backend> backend, compiled::make_backend(p.device));
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
    auto warm = run_model(*p.warm, p.pipeline, p.inputs(), *run.session, {p.tiling, false});
    if (!warm.ok()) return Error("warm=" + p.c.warm + ": " + warm.error().message());
  }
  auto captured = std::make_shared<std::vector<GroupCapture>>();
  if (capture && !p.tiling.enabled)
    run.session->watch(
        [captured](const compiled::Plan& plan, int group, const NamedTensors& stored) {
          captured->push_back(GroupCapture{&plan, group, stored});
        });
  const auto start = std::chrono::steady_clock::now();
  auto outputs = run_model(*p.model, p.pipeline, p.inputs(), *run.session, {p.tiling, capture});
  run.seconds = seconds_since(start);
  run.session->watch({});
  if (!outputs.ok()) return outputs.error();
  run.outputs = std::move(outputs).value();
  run.groups = std::move(*captured);
  return run;
}

Expected<int64_t> compile_pipeline_plans(compiled::Session& s, const Model& m,
                                         const std::string& pipeline, const NamedTensors& inputs) {
  const Shape& input = inputs.front().second.shape();
  TP_ASSIGN_OR_RETURN(std::vector<Stage> stages, m.family().stages(m, pipeline, input));
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
    }
  }
  return out;
}

std::map<int, Tensor> compiled_group_inputs(const PreparedCase& p, const CompiledRun& run,
                                            const GroupCapture& g) {
  // The latest stored value of `v` in `plan` before group `before`.
  auto stored = [&](const compiled::Plan* plan, int v,
                    const GroupCapture* before) -> const Tensor* {
    const Tensor* found = nullptr;
    for (const GroupCapture& c : run.groups) {
      if (&c == before) break;
      if (c.plan != plan) continue;
      const compiled::Group& grp = plan->groups[std::size_t(c.group)];
      for (std::size_t i = 0; i < grp.outputs.size(); ++i)
        if (grp.outputs[i] == v) found = &c.stored[i].second;
    }
    return found;
  };
  std::map<int, Tensor> values;
  const compiled::Plan& plan = *g.plan;
  for (int v : plan.groups[std::size_t(g.group)].inputs) {
    if (const Tensor* t = stored(&plan, v, &g)) {
      values[v] = *t;
      continue;
    }
    // The graph's input: the pipeline input, or in a chained pipeline (a roundtrip) the second
    // graph's input, which the first graph's plan stored.
    const Tensor* handoff = nullptr;
    const std::optional<Handoff> chain = p.model->family().handoff(p.pipeline);
    if (chain && plan.graph->name == chain->second)
      for (const GroupCapture& c : run.groups)
        if (c.plan->graph->name == chain->first)
          for (const auto& [name, id] : c.plan->graph->outputs)
            if (name == chain->output)
              if (const Tensor* t = stored(c.plan, id, nullptr)) handoff = t;
    // A graph input by name among the pipeline's other inputs (a UNet's timestep, context).
    std::string name;
    for (const auto& [n, id] : plan.graph->inputs)
      if (id == v) name = n;
    const Tensor* other = find_tensor(p.other_inputs, name);
    values[v] = handoff ? *handoff : other ? *other : p.input;
  }
  return values;
}

Shape plan_input_shape(const ReferenceRun& ref, const compiled::Plan& plan) {
  return ref.values.at(plan.graph->name).at(plan.graph->inputs[0].second).shape();
}

}  // namespace tp
