#include "compiled/plan_file.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/core/atomic_file.h"
#include "harness/core/untrusted_json.h"

namespace tp::compiled {
namespace {

using nlohmann::json;

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t checksum(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The plan's numerics contract, one row per rounding point: [group, point, name, dtype, rounding].
json contract_json(const Plan& p) {
  json rows = json::array();
  for (const ContractRow& r : plan_contract_rows(p))
    rows.push_back({r.group, r.point, r.name, r.dtype, r.rounding});
  return rows;
}

json plan_to_json(const Plan& p) {
  json groups = json::array();
  for (const Group& g : p.groups)
    groups.push_back({{"kind", int(g.kind)},
                      {"ops", g.ops},
                      {"inputs", g.inputs},
                      {"outputs", g.outputs},
                      {"checkpoints", g.checkpoints},
                      {"upsample_prologue", g.upsample_prologue},
                      {"policy", layer_policy_string(g.policy)}});
  json buffers = json::array();
  for (const auto& [v, b] : p.buffers)
    buffers.push_back({{"value", v},
                       {"dtype", dtype_name(b.dtype)},
                       {"shape", b.shape},
                       {"offset", b.offset},
                       {"bytes", b.bytes},
                       {"first_group", b.first_group},
                       {"last_group", b.last_group}});
  json out = {{"key", p.key},
              {"graph", p.graph->name},
              {"graph_hash", hex(p.graph_hash)},
              {"weights_identity", hex(p.weights_identity)},
              {"capacity_shape", p.capacity_shape},
              {"groups", groups},
              {"buffers", buffers},
              {"stats",
               {{"arena_bytes", p.stats.arena_bytes},
                {"unshared_bytes", p.stats.unshared_bytes},
                {"compile_seconds", p.stats.compile_seconds}}}};
  if (!p.other_inputs.empty()) out["other_inputs"] = p.other_inputs;  // multi-input graphs only
  out["contract"] = contract_json(p);
  return out;
}

// Rebuilds one plan from its JSON, checking every index against the graph, so a damaged file
// fails here with a sentence instead of inside a kernel.
Expected<std::unique_ptr<Plan>> plan_from_json(const json& j, const PlanModel& model,
                                               uint64_t identity, Session& session,
                                               const std::string& file) {
  const std::string graph_name = j.at("graph");
  const Graph* found = nullptr;
  std::string known;
  for (const Graph& g : model.graphs) {  // the one of that name and hash, else of that name
    if (g.name == graph_name &&
        (!found || (found->hash() != g.hash() && j.at("graph_hash") == hex(g.hash()))))
      found = &g;
    known += (known.empty() ? "" : ", ") + g.name;
  }
  if (found == nullptr)
    return Error(file + ": holds a plan for graph '" + graph_name + "', which " + model.dir +
                 " does not have (it has " + known + "); make a new plan file with --save-plan");
  const Graph& graph = *found;
  if (j.at("graph_hash") != hex(graph.hash()))
    return Error(file + ": its " + graph_name + " plan was made for another architecture (graph " +
                 std::string(j.at("graph_hash")) + ", this model's is " + hex(graph.hash()) +
                 "); make a new plan file with --save-plan for " + model.dir);
  if (j.at("weights_identity") != hex(identity))
    return Error(
        file + ": its plans were made for other weights (identity " +
        std::string(j.at("weights_identity")) + ", " + model.dir + " has " + hex(identity) +
        "); use the model the plan was saved with, or make a new plan file with --save-plan");
  auto plan = std::make_unique<Plan>();
  plan->key = j.at("key");
  plan->graph = std::make_shared<const Graph>(graph);
  plan->graph_hash = graph.hash();
  plan->weights_identity = identity;
  plan->capacity_shape = j.at("capacity_shape").get<Shape>();
  if (j.contains("other_inputs"))
    plan->other_inputs = j.at("other_inputs").get<std::vector<Shape>>();
  plan->row_major = graph.has_nd_ops();
  plan->policy = session.options().policy;
  plan->faults = session.options().faults;
  plan->device = session.backend().device();
  const int n_ops = int(graph.ops.size()), n_values = int(graph.value_names.size());
  auto bad = [&](const std::string& what) {
    return Error(file + ": is corrupt (" + what + "); make a new plan file with --save-plan");
  };
  const std::size_t rank = plan->capacity_shape.size();
  if (plan->row_major ? rank < 1 || rank > 5 : rank != 4) return bad("capacity shape");
  if (plan->other_inputs.size() + 1 != graph.inputs.size()) return bad("input count");
  std::vector<int> op_seen(std::size_t(n_ops), 0);
  for (const json& jg : j.at("groups")) {
    Group g;
    const int kind = jg.at("kind");
    if (kind < 0 || kind > int(GroupKind::kTensor)) return bad("group kind");
    g.kind = GroupKind(kind);
    g.ops = jg.at("ops").get<std::vector<int>>();
    g.inputs = jg.at("inputs").get<std::vector<int>>();
    g.outputs = jg.at("outputs").get<std::vector<int>>();
    g.checkpoints = jg.at("checkpoints").get<std::vector<std::string>>();
    g.upsample_prologue = jg.at("upsample_prologue");
    TP_ASSIGN_OR_RETURN(g.policy, parse_layer_policy(jg.at("policy").get<std::string>()));
    for (int o : g.ops) {
      if (o < 0 || o >= n_ops) return bad("op index");
      ++op_seen[std::size_t(o)];
    }
    for (const std::vector<int>* vs : {&g.inputs, &g.outputs})
      for (int v : *vs)
        if (v < 0 || v >= n_values) return bad("value index");
    if (g.ops.empty() || g.checkpoints.size() != g.outputs.size()) return bad("group shape");
    plan->groups.push_back(std::move(g));
  }
  for (int seen : op_seen)
    if (seen != 1) return bad("ops not covered exactly once");
  for (const json& jb : j.at("buffers")) {
    Buffer b;
    b.value = jb.at("value");
    TP_ASSIGN_OR_RETURN(b.dtype, parse_dtype(jb.at("dtype").get<std::string>()));
    b.shape = jb.at("shape").get<Shape>();
    b.offset = jb.at("offset");
    b.bytes = jb.at("bytes");
    b.first_group = jb.at("first_group");
    b.last_group = jb.at("last_group");
    if (b.value < 0 || b.value >= n_values || b.offset < 0 ||
        b.bytes != shape_numel(b.shape) * int64_t(dtype_size(b.dtype)))
      return bad("buffer");
    plan->buffers[b.value] = b;
  }
  const json& s = j.at("stats");
  plan->stats.arena_bytes = s.at("arena_bytes");
  plan->stats.unshared_bytes = s.at("unshared_bytes");
  plan->stats.compile_seconds = s.at("compile_seconds");
  for (const auto& [v, b] : plan->buffers)
    if (b.offset + b.bytes > plan->stats.arena_bytes) return bad("buffer outside the arena");
  for (const Group& g : plan->groups)
    for (const std::vector<int>* vs : {&g.inputs, &g.outputs})
      for (int v : *vs)
        if (!plan->buffers.count(v) && std::none_of(graph.inputs.begin(), graph.inputs.end(),
                                                    [&](auto& in) { return in.second == v; }))
          return bad("a group reads or writes a value without a buffer");
  // Shapes the file claims must be what this graph gives at the capacity shape.
  auto inferred = infer_shapes(graph, plan->capacity_shape, plan->other_inputs);
  if (!inferred.ok()) return bad("input shapes: " + inferred.error().message());
  const std::vector<Shape>& shapes = *inferred;
  for (const auto& [v, b] : plan->buffers)
    if (b.shape != shapes[std::size_t(v)]) return bad("buffer shape");
  // The contract the file states must be the one this twinpath derives from the plan.
  const json stated = j.value("contract", json::array()), derived = contract_json(*plan);
  for (std::size_t i = 0; i < std::max(stated.size(), derived.size()); ++i)
    if (i >= stated.size() || i >= derived.size() || stated[i] != derived[i]) {
      const json& row = i < derived.size() ? derived[i] : stated[i];
      return Error(file + ": its " + graph_name + " plan states another numerics contract than " +
                   "this twinpath gives it (group " + json_excerpt(row.at(0)) + ", " +
                   json_excerpt(row.at(1)) + " " + json_excerpt(row.at(2)) +
                   "); make a new plan file with --save-plan");
    }
  if (Status valid = validate_plan(*plan); !valid.ok()) return bad(valid.error().message());
  TP_RETURN_IF_ERROR(session.prepare_params(*plan, *model.weights));
  plan->stats.groups = int(plan->groups.size());
  plan->stats.ops = n_ops;
  return plan;
}

}  // namespace

std::string plan_file_text(const std::string& body) {
  return "twinpath-plan " + std::to_string(kPlanFormatVersion) + "\n" + body + "\nchecksum " +
         hex(checksum(body)) + "\n";
}

Status save_plans(const Session& session, const std::string& path) {
  json plans = json::array();
  for (const Plan* p : session.plans()) plans.push_back(plan_to_json(*p));
  const SessionOptions& o = session.options();
  const json body = {{"tool_version", TWINPATH_VERSION}, {"device", session.backend().device()},
                     {"policy", o.policy.to_string()},   {"faults", o.faults.to_string()},
                     {"shapes", o.shapes.to_string()},   {"plans", plans}};
  return write_file_atomically(path, [&](std::ostream& out) {
    out << plan_file_text(json_text(body));
    return Status();
  });
}

Status load_plans(Session& session, const PlanModel& model, const std::string& path) {
  return load_plans(session, std::vector<PlanModel>{model}, path);
}

Status load_plans(Session& session, const std::vector<PlanModel>& models, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot open the plan file; check the path");
  std::string magic, body, sum;
  std::getline(in, magic);
  if (magic.rfind("twinpath-plan ", 0) != 0)
    return Error(path + ": is not a twinpath plan file (it does not start with 'twinpath-plan')");
  if (magic != "twinpath-plan " + std::to_string(kPlanFormatVersion))
    return Error(path + ": is plan format " + magic.substr(14) + ", this twinpath reads format " +
                 std::to_string(kPlanFormatVersion) + "; make a new plan file with --save-plan");
  std::getline(in, body);
  std::getline(in, sum);
  if (sum.rfind("checksum ", 0) != 0)
    return Error(path + ": is truncated (no checksum line); make a new plan file with --save-plan");
  if (sum.substr(9) != hex(checksum(body)))
    return Error(path +
                 ": is corrupt (its checksum does not match its content); make a new plan file "
                 "with --save-plan");
  TP_ASSIGN_OR_RETURN(const json j, parse_untrusted_json(body, path));
  try {
    if (j.at("tool_version") != TWINPATH_VERSION)
      return Error(path + ": was made by twinpath " + std::string(j.at("tool_version")) +
                   ", this is " + TWINPATH_VERSION + "; make a new plan file with --save-plan");
    const std::string device = session.backend().device();
    if (j.at("device") != device)
      return Error(path + ": was made for device " + std::string(j.at("device")) +
                   ", this run is on " + device + "; make a plan file on this device");
    const SessionOptions& o = session.options();
    for (const auto& [field, want] :
         {std::pair<const char*, std::string>{"policy", o.policy.to_string()},
          {"faults", o.faults.to_string()},
          {"shapes", o.shapes.to_string()}})
      if (j.at(field) != want)
        return Error(path + ": was made with " + field + " '" + std::string(j.at(field)) +
                     "' but this run asks for '" + want +
                     "'; pass the same options as when it was saved, or make a new plan file with "
                     "--save-plan");
    // A plan's weights are one model's; its graph may be any of theirs (a pipeline runs its
    // own small graphs, such as the latents' unscaling, with the VAE's weights).
    std::vector<uint64_t> identities;
    std::vector<Graph> graphs;
    for (const PlanModel& m : models) {
      identities.push_back(session.identity_of(*m.weights));
      for (const Graph& g : m.graphs)
        if (std::none_of(graphs.begin(), graphs.end(),
                         [&](const Graph& x) { return x.name == g.name && x.hash() == g.hash(); }))
          graphs.push_back(g);
    }
    for (const json& jp : j.at("plans")) {
      // The model the plan's weights are (the first one when none is: its error says so).
      std::size_t which = 0;
      for (std::size_t i = 0; i < models.size(); ++i)
        if (jp.at("weights_identity") == hex(identities[i]) &&
            !session.options().faults.has(Fault::kPlanLoadFirstModel))
          which = i;
      const PlanModel model{graphs, models.at(which).weights, models.at(which).dir};
      TP_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan,
                          plan_from_json(jp, model, identities[which], session, path));
      session.adopt(std::move(plan));
    }
  } catch (const json::exception& e) {
    return Error(path + ": is corrupt (" + e.what() + "); make a new plan file with --save-plan");
  }
  return Status();
}

}  // namespace tp::compiled
