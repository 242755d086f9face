#include "harness/runner/tradeoff.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "compiled/describe_session.h"
#include "harness/core/format.h"
#include "harness/runner/runs.h"

namespace tp {
namespace {

constexpr double kF16Max = 65504;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Case base_case(const TradeoffOptions& o, const PipelineDescriptor& d, int64_t h, int64_t w) {
  Case c;
  c.pipeline = d.name;
  c.model = o.model;
  c.height = h;
  c.width = w;
  c.policy = LayerPolicy{DType::kF32, DType::kF32,
                         DType::kF32};  // the input's seed: the same for every policy
  c.input = d.tradeoff_input;           // a VAE's: a picture (a decoder's: its latents)
  c.options = o.options;
  return c;
}

// The case under `policy` ("w=..,a=..,acc=..[,scale=..][,sat=..]").
Expected<Case> with_policy(Case c, const std::string& policy) {
  if (Status s = apply_policy_text(c, policy); !s.ok())
    return Error("policy '" + policy + "': " + s.error().message());
  return c;
}

void set_times(PolicyPoint& point, std::vector<double> times) {
  std::sort(times.begin(), times.end());
  point.repeats = int(times.size());
  point.seconds_min = times.front();
  point.seconds_max = times.back();
  point.seconds_median = times.size() % 2
                             ? times[times.size() / 2]
                             : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
}

// `repeats` timed runs in the session the captured run warmed up (plans compiled, weights
// prepared, arenas allocated once, as an application runs them).
Status time_policy(compiled::Session& s, const PreparedCase& p, int repeats, PolicyPoint& point) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto out = run_model(*p.model, p.pipeline, p.inputs(), s, p.options());
    if (!out.ok()) return out.error();
    times.push_back(seconds_since(start));
  }
  set_times(point, times);
  point.peak_arena_bytes = s.stats().peak_arena_bytes;
  point.weight_bytes = s.weight_store().bytes_held();
  return Status();
}

// A peer: warm-up, then timed runs of the same pipeline; output error against the reference.
Status measure_peer(const PreparedCase& p, const TradeoffPeer& peer, const ReferenceRun& ref,
                    int repeats, PolicyPoint& point) {
  TP_ASSIGN_OR_RETURN(NamedTensors out,
                      run_model(*p.model, p.pipeline, p.inputs(), peer.run, p.options()));
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    TP_ASSIGN_OR_RETURN(out, run_model(*p.model, p.pipeline, p.inputs(), peer.run, p.options()));
    times.push_back(seconds_since(start));
  }
  set_times(point, times);
  const Tensor* want = find_tensor(ref.outputs, out.front().first);
  if (!want) return Error(peer.name + " has no output " + out.front().first);
  TP_ASSIGN_OR_RETURN(Metrics m,
                      compare_tensors(out.front().second, *want, out.front().second.dtype()));
  point.rel_l2 = m.rel_l2;
  point.max_abs = m.max_abs;
  point.non_finite = m.non_finite_new;
  point.psnr_db = !p.descriptor().image_output() ? 0 : psnr_8bit(out.front().second, *want);
  return Status();
}

// Accuracy: the captured run against the reference, layer by layer (local error included).
void score(const PreparedCase& p, const ReferenceRun& ref, CompiledRun& run,
           TradeoffResolution& res, PolicyPoint& point) {
  const Evaluation e = evaluate(p, ref, run, true);
  std::vector<std::pair<double, std::string>> ranked;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  point.layer_rel_l2.assign(res.layers.size(), nan);
  point.layer_local_rel_l2.assign(res.layers.size(), nan);
  res.f16_headroom.resize(res.layers.size(), nan);
  for (const CheckpointRecord& r : e.checkpoints) {
    if (r.name.rfind("output:", 0) == 0) {
      if (r.name == "output:" + run.outputs.front().first) {
        point.rel_l2 = r.accumulated.rel_l2;
        point.max_abs = r.accumulated.max_abs;
        point.non_finite = r.accumulated.non_finite_new;
      }
      continue;
    }
    auto it = std::find(res.layers.begin(), res.layers.end(), r.name);
    if (it == res.layers.end()) continue;
    const std::size_t i = std::size_t(it - res.layers.begin());
    point.layer_rel_l2[i] = r.accumulated.rel_l2;
    // f16 headroom from the reference's values: the same whatever the policy.
    const double max_ref = r.accumulated.want_max_abs;
    res.f16_headroom[i] = max_ref > 0 ? kF16Max / max_ref : std::numeric_limits<double>::infinity();
    if (r.has_local) {
      point.layer_local_rel_l2[i] = r.local.rel_l2;
      if (r.tolerance_rel_l2 > 0) ranked.emplace_back(r.local.rel_l2 / r.tolerance_rel_l2, r.name);
    }
  }
  std::sort(ranked.rbegin(), ranked.rend());
  for (std::size_t i = 0; i < ranked.size() && i < 5; ++i)
    point.worst_layers.push_back(ranked[i].second + " (" + format_number(ranked[i].first) +
                                 "x tol)");
  const Tensor* want = find_tensor(ref.outputs, run.outputs.front().first);
  point.psnr_db =
      !p.descriptor().image_output() || !want ? 0 : psnr_8bit(run.outputs.front().second, *want);
}

}  // namespace

std::vector<std::string> default_tradeoff_policies() {
  std::vector<std::string> out;
  for (DType a : {DType::kF32, DType::kBF16, DType::kF16})
    for (DType w : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2}) {
      Case c;
      c.policy = LayerPolicy{w, a, DType::kF32};
      if (!expected_supported(c)) continue;
      out.push_back(c.policy_text());
      // The same with attention's operands in the activation dtype (tensor-core attention).
      if (w == a && a != DType::kF32) {
        c.policy.attention_in_activation = true;
        out.push_back(c.policy_text());
      }
      // fp8 storage the way diffusers' layerwise casting does it (no scale, 16-bit compute).
      if (dtype_is_fp8(w) && a != DType::kF32) {
        c.policy.layerwise = true;
        out.push_back(c.policy_text());
      }
    }
  return out;
}

double psnr_8bit(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(DType::kF64), w = want.to(DType::kF64);
  auto byte = [](double x) {
    return std::isfinite(x) ? std::round(std::clamp((x + 1) / 2, 0.0, 1.0) * 255) : 0.0;
  };
  double se = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double d = byte(g.data<double>()[i]) - byte(w.data<double>()[i]);
    se += d * d;
  }
  if (se == 0) return std::numeric_limits<double>::infinity();
  return 10 * std::log10(255.0 * 255.0 / (se / double(g.numel())));
}

Expected<Tradeoff> measure_tradeoff(const TradeoffOptions& o) {
  Tradeoff t;
  t.model = o.model;
  t.device = compiled::device_report_name(o.device);
  t.repeats = o.repeats;
  if (o.repeats < 1) return Error("--repeats must be at least 1");
  const std::vector<std::string> policies =
      o.policies.empty() ? default_tradeoff_policies() : o.policies;
  ModelCache models;
  TP_ASSIGN_OR_RETURN(std::shared_ptr<const Model> measured, models.get(o.model));
  if (!o.pipeline.empty()) TP_RETURN_IF_ERROR(check_family_runs(*measured, o.pipeline));
  const PipelineDescriptor& pipeline = o.pipeline.empty()
                                           ? measured->family().tradeoff_pipeline()
                                           : *measured->family().pipeline(o.pipeline);
  t.pipeline = pipeline.name;
  t.image_output = pipeline.image_output();
  RunOptions ro;
  ro.device = o.device;
  ro.memory_budget = o.memory_budget;
  std::size_t total = policies.size() * o.resolutions.size();
  std::vector<TradeoffPeer> peers;
  if (o.make_peers) {
    TP_ASSIGN_OR_RETURN(peers, o.make_peers(*measured));
    total += peers.size() * o.resolutions.size();
  }
  auto report = [&](const PolicyPoint& point) {
    if (!o.progress) return;
    std::string line = "[" + std::to_string(t.points.size() + 1) + "/" + std::to_string(total) +
                       "] " + point.resolution + " " + point.policy + ": ";
    line += point.ran ? "rel L2 " + format_number(point.rel_l2) + ", " +
                            format_number(point.seconds_median * 1e3) + " ms"
                      : "not run: " + point.note;
    if (point.capture_seconds > 0)
      line += " (capture " + format_number(point.capture_seconds) + " s, scoring " +
              format_number(point.score_seconds) + " s)";
    o.progress(line);
  };
  for (const auto& [h, w] : o.resolutions) {
    TradeoffResolution res;
    res.resolution = resolution_text(h, w);
    Outcome refusal = Outcome::kError;
    TP_ASSIGN_OR_RETURN(PreparedCase base,
                        prepare_case(base_case(o, pipeline, h, w), ro, models, refusal));
    // Every policy's plans first (compiling allocates nothing), so one reference run captures
    // every value any of them reads or stores.
    std::vector<PreparedCase> prepared;
    std::vector<std::unique_ptr<compiled::Session>>
        sessions;  // plans compiled here serve the runs below
    std::vector<std::string> refusals;
    std::map<std::string, std::vector<int>> wanted;
    for (const std::string& policy : policies) {
      TP_ASSIGN_OR_RETURN(Case c, with_policy(base.c, policy));
      PreparedCase p = base;
      p.c = c;
      if (Status checked = compiled::check_layer_policy(c.policy); !checked.ok())
        return Error("policy '" + policy + "': " + checked.error().message());
      p.session.policy.base = c.policy;
      std::string refused;
      auto s = new_compiled_session(p, p.session);
      if (!s.ok()) return s.error();
      if (auto plans = compile_pipeline_plans(**s, *p.model, p.pipeline, p.inputs(), p.options());
          !plans.ok())
        refused = plans.error().message();
      else
        for (const auto& [graph, ids] : checkpoint_values(**s))
          wanted[graph].insert(wanted[graph].end(), ids.begin(), ids.end());
      prepared.push_back(std::move(p));
      sessions.push_back(std::move(s).value());
      refusals.push_back(refused);
    }
    TP_ASSIGN_OR_RETURN(ReferenceRun ref, run_reference(base, wanted));
    res.reference_seconds = ref.seconds;
    if (o.progress)
      o.progress(res.resolution + ": the reference run took " + format_number(ref.seconds) + " s");
    for (std::size_t k = 0; k < policies.size(); ++k) {
      PolicyPoint point;
      point.policy = policies[k];
      point.resolution = res.resolution;
      const PreparedCase& p = prepared[k];
      if (!refusals[k].empty()) {
        point.note = refusals[k];
      } else {
        const auto captured = std::chrono::steady_clock::now();
        auto run = run_compiled(p, p.session.policy, true, std::move(sessions[k]));
        point.capture_seconds = seconds_since(captured);
        if (!run.ok()) {
          point.note = run.error().message();
        } else {
          if (res.layers.empty())  // the layer list: the first policy's checkpoints, in order
            for (const GroupCapture& g : run->groups)
              for (const std::string& name : g.plan->groups[std::size_t(g.group)].checkpoints)
                res.layers.push_back(g.scope + name);
          const auto scoring = std::chrono::steady_clock::now();
          score(p, ref, *run, res, point);
          point.score_seconds = seconds_since(scoring);
          if (Status timed = time_policy(*run->session, p, o.repeats, point); !timed.ok())
            point.note = timed.error().message();
          else
            point.ran = true;
        }
      }
      report(point);
      t.points.push_back(std::move(point));
    }
    for (const TradeoffPeer& peer : peers) {
      PolicyPoint point;
      point.policy = peer.name;
      point.peer = true;
      point.resolution = res.resolution;
      if (!peer.run)
        point.note = "this LibTorch build sees no CUDA device, so there is no peer to compare with";
      else if (Status s = measure_peer(base, peer, ref, o.repeats, point); !s.ok())
        point.note = s.error().message();
      else
        point.ran = true;
      report(point);
      t.points.push_back(std::move(point));
    }
    t.resolutions.push_back(std::move(res));
  }
  return t;
}

}  // namespace tp
