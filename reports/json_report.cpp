#include "reports/json_report.h"

#include <cmath>

#include "harness/core/format.h"
#include "reports/margins.h"
#include "reports/result_schema.h"

namespace tp {
namespace {

// JSON has no inf/NaN: such values are written as strings.
nlohmann::json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

}  // namespace

nlohmann::json case_json(const CaseResult& c) {
  nlohmann::json j;
  j["id"] = c.id;
  j["seed"] = c.seed;
  j["outcome"] = outcome_name(c.outcome);
  j["reason"] = c.reason;
  j["repro"] = c.repro;
  j["device"] = c.device;
  j["reference_seconds"] = c.reference_seconds;
  j["compiled_seconds"] = c.compiled_seconds;
  if (c.peak_rss_bytes > 0) j["peak_rss_bytes"] = c.peak_rss_bytes;
  int failing = 0;
  for (const CheckpointRecord& r : c.checkpoints) failing += !r.passed;
  j["checkpoints"] = c.checkpoints.size();
  j["failing_checkpoints"] = failing;
  for (const CheckpointRecord& r : c.checkpoints)
    if (!r.passed) j["failing"].push_back(row_json(checkpoint_schema(), r));
  if (const auto worst = worst_checkpoint(c))
    j["worst"] = {{"checkpoint", worst->checkpoint->name},
                  {"judged", worst->local ? "local" : "accumulated"},
                  {"measure", worst->measure},
                  {"error", number(worst->error)},
                  {"tolerance", worst->tolerance},
                  {"margin", number(worst->margin)}};
  if (c.provenance.found) {
    const Provenance& p = c.provenance;
    nlohmann::json o;
    o["checkpoint"] = p.checkpoint;
    o["graph"] = p.graph;
    if (!p.step.empty()) o["step"] = p.step;
    o["layer"] = p.layer;
    o["op"] = p.op;
    if (!p.stored_layer.empty()) {
      o["stored_layer"] = p.stored_layer;
      o["stored_op"] = p.stored_op;
    }
    o["cause"] = p.cause;
    o["index"] = p.index;
    o["value"] = number(p.value);
    o["reference_value"] = number(p.reference_value);
    o["reference_max_abs"] = number(p.reference_max_abs);
    if (p.dtype_max > 0) {
      o["dtype_max"] = p.dtype_max;
      o["headroom"] = number(p.dtype_max / p.reference_max_abs);
    }
    nlohmann::json inputs = nlohmann::json::object();
    for (const auto& [name, v] : p.inputs) inputs[name] = number(v);
    o["inputs"] = inputs;
    o["detail"] = p.detail;
    j["origin"] = o;
  } else if (!c.provenance.detail.empty()) {
    j["origin"] = {{"detail", c.provenance.detail}};
  }
  for (const StreamStep& s : c.stream) j["stream"].push_back(row_json(stream_schema(), s));
  if (c.searched) {
    j["keep_fp32"] = c.keep_fp32;
    const std::string flag = join_list(c.keep_fp32, ',');
    j["keep_fp32_flag"] = c.keep_fp32.empty() ? "" : "--keep-fp32 '" + flag + "'";
    j["search"] = {
        {"found", !c.keep_fp32.empty()}, {"runs", c.search_runs}, {"note", c.search_note}};
  }
  return j;
}

nlohmann::json run_json(const RunReport& r) {
  nlohmann::json j;
  j["schema_version"] = r.schema_version;
  j["tool_version"] = r.tool_version;
  j["git_commit"] = r.git_commit;
  j["device"] = r.device;
  j["backend"] = r.backend;
  j["shard"] = r.shard;
  j["summary"] = outcome_counts(r.cases);
  j["incomplete"] = r.incomplete;
  j["not_run"] = nlohmann::json::array();
  for (const auto& [ordinal, id] : r.not_run)
    j["not_run"].push_back({{"ordinal", ordinal}, {"id", id}});
  j["cases"] = nlohmann::json::array();
  for (const CaseResult& c : r.cases) j["cases"].push_back(case_json(c));
  return j;
}

nlohmann::json diff_json(const std::vector<DiffFinding>& findings,
                         const std::vector<std::string>& unmatched, double ratio) {
  nlohmann::json j;
  j["growth"] = ratio;
  j["regressions"] = nlohmann::json::array();
  for (const DiffFinding& f : findings)
    j["regressions"].push_back(
        {{"case", f.case_id}, {"checkpoint", f.checkpoint}, {"what", f.what}});
  j["unmatched"] = unmatched;
  return j;
}

}  // namespace tp
