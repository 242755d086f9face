#include "reports/report_tools.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "harness/core/shard.h"

namespace tp {
namespace {

// Higher is worse; a pass that became anything else is a regression.
int severity(Outcome o) {
  switch (o) {
    case Outcome::kPassed:
      return 0;
    case Outcome::kSkipped:
    case Outcome::kUnsupported:
    case Outcome::kMistrusted:
      return 1;
    case Outcome::kFailed:
      return 2;
    case Outcome::kError:
      return 3;
  }
  return 3;
}

std::string growth(const char* what, double base, double next) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s rel L2 grew %.3g -> %.3g (x%.1f)", what, base, next,
                base > 0 ? next / base : 0.0);
  return buf;
}

// A case's id without its injected faults: a run with --inject is compared with the clean
// baseline of the same case, as a kernel change would be.
std::string without_faults(const std::string& id) {
  const std::size_t at = id.find(" inject=");
  if (at == std::string::npos) return id;
  const std::size_t end = id.find(' ', at + 1);
  return id.substr(0, at) + (end == std::string::npos ? "" : id.substr(end));
}

std::string plan_facts(const PlanSummary& p) {
  return p.graph + ": " + std::to_string(p.groups) + " groups, arena " +
         std::to_string(p.arena_bytes) + " bytes, " + std::to_string(p.rounding_points) +
         " rounding points; ";
}

}  // namespace

std::vector<DiffFinding> diff_reports(const RunReport& base, const RunReport& next,
                                      const DiffOptions& o) {
  std::map<std::string, const CaseResult*> before;
  for (const CaseResult& c : base.cases) before[without_faults(c.id)] = &c;
  std::vector<DiffFinding> out;
  for (const CaseResult& n : next.cases) {
    auto it = before.find(without_faults(n.id));
    if (it == before.end()) continue;
    const CaseResult& b = *it->second;
    if (severity(n.outcome) > severity(b.outcome))
      out.push_back({n.id, "",
                     std::string("outcome ") + outcome_name(b.outcome) + " -> " +
                         outcome_name(n.outcome) + ": " + n.reason});
    // Plan-level facts: a change is a finding even when the outputs agree (a report from before
    // plans were recorded has none to compare).
    if (!b.plans.empty() && !n.plans.empty()) {
      std::string was, is;
      for (const PlanSummary& p : b.plans) was += plan_facts(p);
      for (const PlanSummary& p : n.plans) is += plan_facts(p);
      if (was != is) out.push_back({n.id, "", "plans changed: " + was + "-> " + is});
    }
    std::map<std::string, const CheckpointRecord*> checkpoints;
    for (const CheckpointRecord& r : b.checkpoints) checkpoints[r.name] = &r;
    for (const CheckpointRecord& r : n.checkpoints) {
      auto c = checkpoints.find(r.name);
      if (c == checkpoints.end()) continue;
      const CheckpointRecord& old = *c->second;
      if (r.accumulated.non_finite_new > old.accumulated.non_finite_new)
        out.push_back({n.id, r.name,
                       std::to_string(r.accumulated.non_finite_new) +
                           " non-finite values where the reference is finite (" +
                           std::to_string(old.accumulated.non_finite_new) + " before)"});
      const double acc = r.accumulated.rel_l2 / std::max(old.accumulated.rel_l2, o.floor);
      if (acc > o.ratio)
        out.push_back({n.id, r.name,
                       growth("accumulated", old.accumulated.rel_l2, r.accumulated.rel_l2), acc});
      const double local = r.local.rel_l2 / std::max(old.local.rel_l2, o.floor);
      if (r.has_local && old.has_local && local > o.ratio)
        out.push_back({n.id, r.name, growth("local", old.local.rel_l2, r.local.rel_l2), local});
    }
  }
  return out;
}

std::vector<std::string> unmatched_cases(const RunReport& base, const RunReport& next) {
  std::map<std::string, int> seen;
  for (const CaseResult& c : base.cases) seen[without_faults(c.id)] |= 1;
  for (const CaseResult& c : next.cases) seen[without_faults(c.id)] |= 2;
  std::vector<std::string> out;
  for (const auto& [id, where] : seen)
    if (where != 3) out.push_back((where == 1 ? "only in BASE: " : "only in NEW: ") + id);
  return out;
}

namespace {

// Shards merge into the unsharded run only when every one finished and each of 0..N-1 is there
// once: a scheduler's array task that was killed or never ran must not leave a report that looks
// whole.
Status check_shard_set(const std::vector<RunReport>& shards,
                       const std::vector<std::string>& names) {
  int total = 0;
  std::map<int, std::string> present;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const RunReport& r = shards[i];
    if (r.incomplete)
      return Error(names[i] + " is incomplete (" + std::to_string(r.not_run.size()) +
                   " cases not run); finish it with `twinpath run --resume " + names[i] +
                   "` before merging");
    if (r.shard.empty()) continue;
    const std::optional<ShardSpec> spec = parse_shard_spec(r.shard);
    if (!spec) return Error(names[i] + " names its shard '" + r.shard + "', which is not K/N");
    const int index = spec->index, count = spec->total;
    if (total != 0 && count != total)
      return Error(names[i] + " is shard " + r.shard + " but " + present.begin()->second +
                   " is one of " + std::to_string(total) + "; merge the shards of one run");
    total = count;
    const auto [it, fresh] = present.emplace(index, names[i]);
    if (!fresh)
      return Error("shard " + r.shard + " is in both " + it->second + " and " + names[i] +
                   "; merge the shards of one run, each once");
  }
  if (total == 0) return Status();
  for (std::size_t i = 0; i < shards.size(); ++i)
    if (shards[i].shard.empty())
      return Error(names[i] + " is a whole run, the others are shards of " + std::to_string(total) +
                   "; merge the shards of one run");
  std::string missing;
  for (int k = 0; k < total; ++k)
    if (!present.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  if (!missing.empty())
    return Error("shard " + missing + " of " + std::to_string(total) +
                 " is missing (a task that failed to start or was killed?); rerun it with --shard "
                 "K/" +
                 std::to_string(total) + " and merge all " + std::to_string(total));
  return Status();
}

}  // namespace

Expected<RunReport> merge_reports(const std::vector<RunReport>& shards,
                                  const std::vector<std::string>& names) {
  if (shards.empty()) return Error("report merge needs at least one report");
  TP_RETURN_IF_ERROR(check_shard_set(shards, names));
  RunReport merged = shards[0];
  merged.shard.clear();
  merged.cases.clear();
  std::map<std::string, std::string> owner;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].device != merged.device || shards[i].backend != merged.backend)
      return Error(names[i] + " ran on " + shards[i].device + " " + shards[i].backend + " but " +
                   names[0] + " on " + merged.device + " " + merged.backend +
                   "; merge shards of one run only");
    for (const CaseResult& c : shards[i].cases) {
      auto [it, fresh] = owner.emplace(c.id, names[i]);
      if (!fresh)
        return Error("case '" + c.id + "' is in both " + it->second + " and " + names[i] +
                     "; merge the shards of one run, each once");
      merged.cases.push_back(c);
    }
  }
  std::stable_sort(merged.cases.begin(), merged.cases.end(),
                   [](const CaseResult& a, const CaseResult& b) { return a.ordinal < b.ordinal; });
  return merged;
}

}  // namespace tp
