#include "harness/runner/runs.h"

#include <chrono>
#include <set>

#include "compiled/describe_session.h"
#include "harness/models/vae/pipeline.h"
#include "harness/models/vae/vae_graphs.h"
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
  TP_ASSIGN_OR_RETURN(r.outputs, run_pipeline(*p.model, p.pipeline, p.input, runner, p.tiling));
  r.seconds = seconds_since(start);
  // A roundtrip's encoder outputs, as the compiled side reports them (run_compiled with capture).
  if (p.pipeline == Pipeline::kRoundtrip && !p.tiling.enabled)
    if (auto values = r.values.find("vae.encoder"); values != r.values.end())
      for (const auto& [name, id] : build_encoder_graph(p.model->config).outputs)
        if (auto v = values->second.find(id); v != values->second.end())
          r.outputs.emplace_back("encoder." + name, v->second);
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
    auto warm = run_pipeline(*p.warm, p.pipeline, p.input, *run.session, p.tiling);
    if (!warm.ok()) return Error("warm=" + p.c.warm + ": " + warm.error().message());
  }
  auto captured = std::make_shared<std::vector<GroupCapture>>();
  if (capture && !p.tiling.enabled)
    run.session->watch(
        [captured](const compiled::Plan& plan, int group, const NamedTensors& stored) {
          captured->push_back(GroupCapture{&plan, group, stored});
        });
  const auto start = std::chrono::steady_clock::now();
  auto outputs = run_pipeline(*p.model, p.pipeline, p.input, *run.session, p.tiling, capture);
  run.seconds = seconds_since(start);
  run.session->watch({});
  if (!outputs.ok()) return outputs.error();
  run.outputs = std::move(outputs).value();
  run.groups = std::move(*captured);
  return run;
}

Expected<int64_t> compile_pipeline_plans(compiled::Session& s, const Model& m, Pipeline pipeline,
                                         const Shape& input) {
  const Graph encoder = build_encoder_graph(m.config), decoder = build_decoder_graph(m.config);
  if (pipeline == Pipeline::kDecode) {
    TP_ASSIGN_OR_RETURN(const compiled::Plan* d, s.plan_for(decoder, m.weights, input));
    return d->stats.arena_bytes;
  }
  TP_ASSIGN_OR_RETURN(const compiled::Plan* e, s.plan_for(encoder, m.weights, input));
  if (pipeline == Pipeline::kEncode) return e->stats.arena_bytes;
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes, compiled::infer_shapes(encoder, input));
  TP_ASSIGN_OR_RETURN(
      const compiled::Plan* d,
      s.plan_for(decoder, m.weights, shapes[std::size_t(encoder.outputs[0].second)]));
  return e->stats.arena_bytes + d->stats.arena_bytes;
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
    // The graph's input: the pipeline input, or in a roundtrip the decoder's latents, which the
    // encoder plan stored.
    const Tensor* handoff = nullptr;
    if (p.pipeline == Pipeline::kRoundtrip && plan.graph->name == "vae.decoder")
      for (const GroupCapture& c : run.groups)
        if (c.plan->graph->name == "vae.encoder")
          for (const auto& [name, id] : c.plan->graph->outputs)
            if (name == "mean" || name == "latents")
              if (const Tensor* t = stored(c.plan, id, nullptr)) handoff = t;
    values[v] = handoff ? *handoff : p.input;
  }
  return values;
}

Shape plan_input_shape(const ReferenceRun& ref, const compiled::Plan& plan) {
  return ref.values.at(plan.graph->name).at(plan.graph->inputs[0].second).shape();
}

}  // namespace tp
