// Shared runtimes must not change results (field reports 1 and 2): a run that shared its session
// with another model (warm=), a roundtrip whose encoder and decoder plans are co-resident, and
// plans saved and loaded into a fresh session must equal isolated runs bit for bit.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "compiled/describe_session.h"
#include "compiled/plan_file.h"
#include "harness/runner/chained_output.h"
#include "harness/runner/runs.h"

namespace tp {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

int64_t differing(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return a.numel();
  const Tensor x = a.to(DType::kF64), y = b.to(DType::kF64);
  int64_t n = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double u = x.data<double>()[i], v = y.data<double>()[i];
    n += !(u == v || (std::isnan(u) && std::isnan(v)));
  }
  return n;
}

// The first captured checkpoint of `graph` whose bits differ between two runs.
std::string first_differing_checkpoint(const CompiledRun& a, const CompiledRun& b,
                                       const std::string& graph) {
  std::vector<const GroupCapture*> xs, ys;
  for (const GroupCapture& g : a.groups)
    if (g.plan->graph->name == graph) xs.push_back(&g);
  for (const GroupCapture& g : b.groups)
    if (g.plan->graph->name == graph) ys.push_back(&g);
  for (std::size_t i = 0; i < std::min(xs.size(), ys.size()); ++i)
    for (std::size_t k = 0; k < xs[i]->stored.size() && k < ys[i]->stored.size(); ++k)
      if (!same_bits(xs[i]->stored[k].second, ys[i]->stored[k].second))
        return xs[i]->scope + xs[i]->stored[k].first;
  return "";
}

// "" when every output of `isolated` (renamed by `prefix`) has the same bits in `shared`.
std::string compare_runs(const CompiledRun& shared, const CompiledRun& isolated,
                         const std::string& prefix, const std::string& what) {
  for (const auto& [name, t] : isolated.outputs) {
    const Tensor* s = find_tensor(shared.outputs, prefix + name);
    if (!s || same_bits(*s, t)) continue;
    std::string first;
    for (const GroupCapture& g : isolated.groups)
      if (first.empty()) first = first_differing_checkpoint(shared, isolated, g.plan->graph->name);
    return what + ": output " + prefix + name + " differs from the isolated run in " +
           std::to_string(differing(*s, t)) + " of " + std::to_string(t.numel()) + " elements" +
           (first.empty() ? "" : "; first checkpoint that differs: " + first);
  }
  return "";
}

}  // namespace

std::string check_isolation(const PreparedCase& p, const CompiledRun& run) {
  if (p.tiling.enabled) return "";
  if (p.warm) {
    PreparedCase alone = p;
    alone.warm.reset();
    auto isolated = run_compiled(alone, p.session.policy, true);
    if (!isolated.ok())
      return "the isolated run (without warm=) failed: " + isolated.error().message();
    std::string why =
        compare_runs(run, *isolated, "", "after warm=" + p.c.warm + " in the same session");
    if (!why.empty()) return why;
  }
  if (const std::optional<Handoff>& chain = p.descriptor().handoff) {
    // The first graph alone, then the second alone on its output, each in a session of its own.
    const PreparedCase first = stage_case(p, chain->first_pipeline, p.input);
    auto one = run_compiled(first, p.session.policy, true);
    if (!one.ok()) return "the isolated " + first.pipeline + " failed: " + one.error().message();
    const std::string together = chain->first + " and " + chain->second + " co-resident";
    std::string why = compare_runs(run, *one, chain->prefix, together);
    if (!why.empty()) return why;
    const Tensor* handoff = find_tensor(one->outputs, chain->output);
    if (!handoff) return "";
    const PreparedCase second = stage_case(p, chain->second_pipeline, *handoff);
    auto two = run_compiled(second, p.session.policy, true);
    if (!two.ok()) return "the isolated " + second.pipeline + " failed: " + two.error().message();
    return compare_runs(run, *two, "", together);
  }
  return "";
}

std::string check_interleaved(const PreparedCase& p, CompiledRun& run) {
  const std::optional<Handoff>& chain = p.descriptor().handoff;
  if (!chain) return "interleave=on needs a chained pipeline; " + p.pipeline + " is not one";
  const std::string &first = chain->first_pipeline, &second = chain->second_pipeline;
  // Each call in a session of its own.
  auto alone = [&](const std::string& stage, const Tensor& input) -> Expected<Tensor> {
    TP_ASSIGN_OR_RETURN(CompiledRun r,
                        run_compiled(stage_case(p, stage, input), p.session.policy, false));
    const Tensor* t = stage == first ? find_tensor(r.outputs, chain->output) : nullptr;
    return t ? *t : r.outputs.front().second;
  };
  auto encoded = alone(first, p.input);
  if (!encoded.ok()) return "the isolated " + first + " failed: " + encoded.error().message();
  const Tensor z = encoded->to(DType::kF32);
  Tensor other = encoded->to(DType::kF32);  // a second latent, as another request brings
  for (int64_t i = 0; i < other.numel(); ++i) other.data<float>()[i] *= -0.5f;
  auto decoded = alone(second, z), decoded_other = alone(second, other);
  if (!decoded.ok() || !decoded_other.ok())
    return "the isolated " + second +
           " failed: " + (decoded.ok() ? decoded_other : decoded).error().message();
  // One session, one model's weights, both pipelines called in turn after the chained one.
  struct Call {
    const std::string& stage;
    const Tensor& input;
    const Tensor& want;
  };
  const Call calls[] = {{second, other, *decoded_other},
                        {first, p.input, *encoded},
                        {second, z, *decoded},
                        {first, p.input, *encoded},
                        {second, other, *decoded_other}};
  for (std::size_t i = 0; i < std::size(calls); ++i) {
    auto out = run_model(*p.model, calls[i].stage, calls[i].input, *run.session, p.options());
    if (!out.ok())
      return "interleaved call " + std::to_string(i + 1) + " failed: " + out.error().message();
    const Tensor* got =
        calls[i].stage == first ? find_tensor(*out, chain->output) : &out->front().second;
    if (!got || !same_bits(*got, calls[i].want))
      return "interleaved calls in one session: call " + std::to_string(i + 1) + " (" +
             calls[i].stage + ") differs from the same call in a session of its own" +
             (got ? " in " + std::to_string(differing(*got, calls[i].want)) + " of " +
                        std::to_string(got->numel()) + " elements"
                  : "");
  }
  return "";
}

std::string check_plan_reload(const PreparedCase& p) {
  PreparedCase alone = p;
  alone.warm.reset();
  auto fresh = run_compiled(alone, p.session.policy, false);
  if (!fresh.ok()) return "the run before saving plans failed: " + fresh.error().message();
  // One file per check: cases run concurrently in one process (`--jobs`), and a name shared
  // between them let one case remove the file another was loading.
  static std::atomic<uint64_t> checks{0};
  const std::string file =
      (std::filesystem::temp_directory_path() /
       ("twinpath-reload-" + std::to_string(::getpid()) + "-" + std::to_string(checks++) + ".plan"))
          .string();
  struct Remove {
    const std::string& f;
    ~Remove() { std::remove(f.c_str()); }
  } remove{file};
  if (Status s = compiled::save_plans(*fresh->session, file); !s.ok())
    return "saving plans failed: " + s.error().message();
  // A fresh session that loads the file: its runs must be cache hits with the same bits.
  auto made = new_compiled_session(p, p.session);
  if (!made.ok()) return made.error().message();
  compiled::Session& loaded = **made;
  std::vector<compiled::PlanModel> models;
  for (const Model* m : p.models())
    models.push_back({m->family().graphs(*m->config), &m->weights, m->dir});
  if (Status s = compiled::load_plans(loaded, models, file); !s.ok())
    return "loading the saved plans failed: " + s.error().message();
  auto again = run_model(*p.model, p.pipeline, p.inputs(), loaded, p.options());
  if (!again.ok()) return "running the loaded plans failed: " + again.error().message();
  if (loaded.stats().compilations != 0)
    return "the loaded plans were not used: the fresh session compiled " +
           std::to_string(loaded.stats().compilations) + " plans";
  for (const auto& [name, t] : fresh->outputs) {
    const Tensor* s = find_tensor(*again, name);
    if (!s || !same_bits(*s, t))
      return "plans saved and loaded: output " + name +
             " differs from the run that saved them in " +
             std::to_string(s ? differing(*s, t) : t.numel()) + " of " + std::to_string(t.numel()) +
             " elements";
  }
  return "";
}

}  // namespace tp
