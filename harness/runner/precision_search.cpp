// Precision search: the smallest set of layers to keep in fp32 so the case passes. Layers are
// ranked by suspicion (the NaN origin, then local error against tolerance, then overflow
// headroom); a bisection over prefixes of that ranking finds how many are needed in log2(n)
// runs, then each member is dropped in turn if the case still passes without it.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "harness/core/format.h"
#include "harness/runner/runs.h"

namespace tp {
namespace {

constexpr int kMaxMinimizeRuns = 24;  // one run per member tried; beyond this the prefix stands

std::vector<std::string> ranked_layers(const CompiledRun& run, const Evaluation& failed,
                                       const Provenance& origin) {
  std::vector<std::string> order;
  std::map<std::string, double> score;
  std::map<std::string, std::vector<std::string>>
      layers_of_checkpoint;  // checkpoint -> its group's weighted layers
  for (const compiled::Plan* plan : run.session->plans())
    for (const compiled::Group& grp : plan->groups) {
      std::vector<std::string> layers;
      for (int o : grp.ops) {
        const Op& op = plan->graph->ops[std::size_t(o)];
        if (op.weight.empty()) continue;
        layers.push_back(op.name);
        if (!score.count(op.name)) {
          score[op.name] = 0;
          order.push_back(op.name);
        }
      }
      for (const std::string& c : grp.checkpoints) layers_of_checkpoint[c] = layers;
    }
  for (const CheckpointRecord& rec : failed.checkpoints) {
    auto it = layers_of_checkpoint.find(unscoped(rec.name));  // any step's, the module's
    if (it == layers_of_checkpoint.end()) continue;
    double s = 0;
    if (rec.has_local && rec.tolerance_rel_l2 > 0) s = rec.local.rel_l2 / rec.tolerance_rel_l2;
    if (rec.accumulated.non_finite_new > 0) s = std::max(s, 1.0);
    if (rec.accumulated.headroom > 0 && std::isfinite(rec.accumulated.headroom))
      s += 1 / rec.accumulated.headroom;
    for (const std::string& layer : it->second) score[layer] = std::max(score[layer], s);
  }
  if (origin.found && score.count(origin.layer)) score[origin.layer] = INFINITY;
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return score[a] > score[b]; });
  return order;
}

// What keeping the answer in fp32 did to the pipeline outputs: "output:sample rel L2 2.14e-03
// (was 12288 non-finite)", "output:sample rel L2 1.10e-03 (was 9.02e-03)".
std::string effect_text(const Evaluation& before, const Evaluation& after) {
  std::string text;
  for (const CheckpointRecord& a : after.checkpoints) {
    if (a.group >= 0) continue;
    auto b = std::find_if(before.checkpoints.begin(), before.checkpoints.end(),
                          [&](const CheckpointRecord& r) { return r.name == a.name; });
    text +=
        (text.empty() ? "" : ", ") + a.name + printf_numbers(" rel L2 %.2e", a.accumulated.rel_l2);
    if (b == before.checkpoints.end()) continue;
    const Metrics& was = b->accumulated;
    if (was.non_finite_new == 0)
      text += printf_numbers(" (was %.2e)", was.rel_l2);
    else
      text += " (was " + std::to_string(was.non_finite_new) + " non-finite" +
              (was.count > 0 ? printf_numbers(", rel L2 %.2e over the rest)", was.rel_l2) : ")");
  }
  return text;
}

}  // namespace

SearchResult search_keep_fp32(const PreparedCase& p, const ReferenceRun& ref,
                              const CompiledRun& failing, const Evaluation& failed,
                              const Provenance& origin) {
  SearchResult r;
  const std::vector<std::string> ranked = ranked_layers(failing, failed, origin);
  std::map<std::vector<std::string>, std::string> effects;  // of each passing keep list
  auto passes = [&](const std::vector<std::string>& keep) {
    compiled::DTypePolicy policy = p.session.policy;
    policy.keep_fp32.insert(policy.keep_fp32.end(), keep.begin(), keep.end());
    ++r.runs;
    auto run = run_compiled(p, policy, true);
    if (!run.ok()) return false;
    const Evaluation e = evaluate(p, ref, *run, true);
    if (!e.failed) effects[keep] = effect_text(failed, e);
    return !e.failed;
  };
  auto found = [&](std::vector<std::string> keep, const std::string& note) {
    r.found = true;
    const auto effect = effects.find(keep);
    r.note = note + (effect == effects.end() ? "" : "; with them in fp32: " + effect->second);
    r.keep_fp32 = std::move(keep);
    return r;
  };
  if (ranked.empty()) {
    r.note = "the model has no layers with weights to keep in fp32";
    return r;
  }
  if (!passes(ranked)) {
    // Values stored between layers (residual sums, skips, reshapes: ops without weights) keep
    // the base activation dtype; when only keeping every op passes, they are what outgrows it.
    if (passes({"*"})) {
      // The modules around the origin, innermost first: a residual sum or time-embedding add
      // that overflows right after the origin's layer is kept with it.
      if (origin.found)
        for (std::string module = unscoped(origin.layer); module.find('.') != std::string::npos;) {
          module = module.substr(0, module.rfind('.'));
          if (!passes({module + ".*"})) continue;
          return found({module + ".*"},
                       "found in " + std::to_string(r.runs) +
                           " runs: keeping every layer with weights fails, but values between "
                           "layers outgrow the activation dtype inside " +
                           module + ", the module around the origin; keep it whole");
        }
      r.note = "keeping all " + std::to_string(ranked.size()) +
               " layers with weights in fp32 still fails, but keeping every op passes: values "
               "between the layers (residual sums, skips) outgrow the activation dtype" +
               (origin.found ? " from " + origin.checkpoint + " on" : std::string()) +
               "; keep the blocks from there on in fp32 (a glob such as keep=up_blocks.*) or "
               "use an activation dtype with more range (bf16)";
      return r;
    }
    r.note = "keeping all " + std::to_string(ranked.size()) +
             " layers with weights in fp32 still fails: the failure is not the activation or "
             "weight precision "
             "(a kernel bug, an injected fault, or an input the reference cannot handle either)";
    return r;
  }
  // The most suspect layer alone settles most cases (an overflow origin) in one more run; else the
  // smallest prefix of the ranking that passes (fp32 layers only help: more kept never hurts).
  std::size_t lo = 1, hi = ranked.size();
  if (passes({ranked[0]}))
    hi = 1;
  else
    lo = 2;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (passes(std::vector<std::string>(ranked.begin(), ranked.begin() + std::ptrdiff_t(mid))))
      hi = mid;
    else
      lo = mid + 1;
  }
  std::vector<std::string> keep(ranked.begin(), ranked.begin() + std::ptrdiff_t(lo));
  // Drop members the case passes without, latest-ranked first.
  int budget = kMaxMinimizeRuns;
  for (std::size_t i = keep.size(); i-- > 0 && keep.size() > 1 && budget-- > 0;) {
    std::vector<std::string> without = keep;
    without.erase(without.begin() + std::ptrdiff_t(i));
    if (passes(without)) keep = std::move(without);
  }
  return found(std::move(keep), "found in " + std::to_string(r.runs) + " runs over " +
                                    std::to_string(ranked.size()) + " layers");
}

}  // namespace tp
