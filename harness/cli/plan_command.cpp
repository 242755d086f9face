// `twinpath plan show`: the plans a case compiles to, group by group, with each group's numerics
// contract (its rounding points), without running anything.
#include <iostream>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/core/untrusted_json.h"
#include "harness/runner/case_runner.h"

namespace tp {

Expected<int> plan_show_command(const std::string& case_line, bool json) {
  TP_ASSIGN_OR_RETURN(Case c, parse_case(case_line));
  ModelCache models;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Session> session, plan_case(c, models));
  nlohmann::json out = nlohmann::json::array();
  for (const compiled::Plan* plan : session->plans()) {
    const std::vector<ContractRow> rows = compiled::plan_contract_rows(*plan);
    if (json) {
      nlohmann::json p = {{"graph", plan->graph->name},
                          {"capacity_shape", plan->capacity_shape},
                          {"policy", plan->policy.to_string()},
                          {"groups", plan->groups.size()},
                          {"arena_bytes", plan->stats.arena_bytes},
                          {"contract", nlohmann::json::array()}};
      for (const ContractRow& r : rows)
        p["contract"].push_back({{"group", r.group},
                                 {"checkpoint", plan->groups[std::size_t(r.group)].checkpoints[0]},
                                 {"point", r.point},
                                 {"name", r.name},
                                 {"dtype", r.dtype},
                                 {"rounding", r.rounding}});
      out.push_back(p);
      continue;
    }
    std::cout << "plan " << plan->graph->name << " " << shape_string(plan->capacity_shape) << ", "
              << plan->policy.to_string() << ": " << plan->groups.size() << " groups, arena "
              << plan->stats.arena_bytes << " bytes\n";
    int group = -1;
    for (const ContractRow& r : rows) {
      if (r.group != group) {
        group = r.group;
        const compiled::Group& g = plan->groups[std::size_t(group)];
        std::cout << "  group " << group << " " << compiled::group_contract(*plan, group).label
                  << " -> " << g.checkpoints[0] << (g.checkpoints.size() > 1 ? " ..." : "") << "\n";
      }
      std::string point = r.point;
      point.resize(std::max<std::size_t>(point.size(), 12), ' ');
      std::string dtype = r.dtype;
      dtype.resize(std::max<std::size_t>(dtype.size(), 7), ' ');
      std::cout << "    " << point << dtype << r.name << ": " << r.rounding << "\n";
    }
  }
  if (json) std::cout << json_text(out, 1) << "\n";
  return 0;
}

}  // namespace tp
