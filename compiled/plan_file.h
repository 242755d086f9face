// Plan files (`--save-plan` / `--load-plan`): a session's plans, so a fresh process can skip
// planning. A file is validated on load — format version, tool version, device, checksum,
// graph hash, weights identity, policy, numerics contract — and any mismatch is one sentence saying
// what does not match and what to do (field report 2), never an assertion. Weights are not in the
// file: they are prepared again from the model, which must be the one the plan was made for.
//   line 1: "twinpath-plan <format version>"; line 2: JSON; line 3: "checksum <hex>"
#pragma once

#include <string>

#include "compiled/session.h"
#include "harness/core/graph.h"

namespace tp::compiled {

// 2: each plan states its numerics contract; 3: one op set (convs, adds, slices, upsamples);
// 4: the VAE attention as linear_last and multi-head attention on token views
constexpr int kPlanFormatVersion = 4;

// A plan file's text around its JSON body: the format line and the body's checksum.
std::string plan_file_text(const std::string& body);

// Writes every plan in the session, atomically.
Status save_plans(const Session& session, const std::string& path);

// The model a plan file is loaded for: its graphs (a plan names the graph it was made for),
// its weights, and its folder (for messages).
struct PlanModel {
  std::vector<Graph> graphs;
  const Weights* weights = nullptr;
  std::string dir;
};

// Reads `path`, checks it against `model` and the session's options, and adds its plans to
// the session (they are then cache hits).
Status load_plans(Session& session, const PlanModel& model, const std::string& path);
// The same for a session several models share (a base and a refiner UNet, the VAE both
// decode with): each plan goes to the model whose weights it was made for.
Status load_plans(Session& session, const std::vector<PlanModel>& models, const std::string& path);

}  // namespace tp::compiled
