// `twinpath triage`: a user's model, input and configuration in, a few lines out: the outcome,
// where the first non-finite value came from and why, and the --keep-fp32 list that fixes it.
// `twinpath replay`: the minimal repro triage writes, run alone.
#include <filesystem>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "harness/core/tensor_io.h"
#include "harness/core/untrusted_json.h"
#include "harness/runner/activation_triage.h"
#include "harness/runner/case_runner.h"
#include "harness/runner/group_repro.h"
#include "reports/h5_report.h"
#include "reports/json_report.h"
#include "reports/run_page.h"

namespace tp {
namespace {

// The user's configuration as a case line (the input file's shape gives the resolution).
Expected<Case> triage_case(const TriageOptions& o, const Model& model) {
  Case c;
  TP_RETURN_IF_ERROR(check_family_runs(model, o.pipeline));
  c.pipeline = o.pipeline;
  c.model = o.model_dir;
  c.input = o.input;
  const Family& family = model.family();
  TP_ASSIGN_OR_RETURN(NamedTensors file, read_tensor_file(o.input));
  TP_ASSIGN_OR_RETURN(Tensor input, family.select_input(o.pipeline, file, o.input));
  TP_RETURN_IF_ERROR(family.check_input(model, o.pipeline, input));
  const int64_t scale = family.input_scale(*model.config, o.pipeline);
  c.height = input.dim(input.rank() - 2) * scale;
  c.width = input.dim(input.rank() - 1) * scale;
  // The policy flag's fields become the case's.
  if (Status s = apply_policy_text(c, o.policy); !s.ok())
    return Error("--policy " + s.error().message());
  if (o.tiling != "on" && o.tiling != "off")
    return Error("--tiling " + o.tiling + " is unknown; use on or off");
  c.tiling = o.tiling == "on";
  c.keep_fp32 = split_list(o.keep_fp32, ',');
  c.inject = split_list(o.inject, ',');
  TP_ASSIGN_OR_RETURN(c.options, family_flag_values(o.family, o.pipeline));
  // Round-trip through the parser: the triage case is exactly what its repro line runs.
  return parse_case(c.id());
}

std::string first_few(const std::vector<std::string>& names, std::size_t n = 5) {
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < n; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > n) s += ", ... (" + std::to_string(names.size() - n) + " more)";
  return s;
}

// The triage's report (--report) and page (--page), where asked for.
Status save_triage(const TriageOptions& o, const std::string& command, compiled::Device device,
                   const CaseResult& r) {
  RunReport report = report_header(command, device);
  report.cases.push_back(r);
  if (!o.report.empty()) TP_RETURN_IF_ERROR(write_h5_report(o.report, report));
  if (o.page.empty()) return Status();
  TP_ASSIGN_OR_RETURN(const std::string written, write_run_page(o.page, report, {}));
  std::cerr << "page: " << written << "\n";
  return Status();
}

// --activations: the user's own stack's dump against the reference.
Expected<int> triage_dump(const TriageOptions& o) {
  if (!o.input.empty() || !o.pipeline.empty())
    return Error(
        "--activations takes its pipeline and inputs from the dump; drop --input and --pipeline");
  TP_ASSIGN_OR_RETURN(const int64_t budget, memory_budget_option(o.mem));
  TP_ASSIGN_OR_RETURN(Model model, load_model(o.model_dir));
  TP_ASSIGN_OR_RETURN(ActivationTriage t, triage_activations(o.activations, model, budget));
  const CaseResult& r = t.result;
  TP_RETURN_IF_ERROR(save_triage(o, "twinpath triage --activations", compiled::Device::kCpu, r));
  if (o.json) {
    nlohmann::json j = case_json(r);
    j["activations"] = {{"dump", o.activations},
                        {"pipeline", t.pipeline},
                        {"dtype", t.dtype},
                        {"layerwise_fp8", t.layerwise_fp8},
                        {"compared", t.compared},
                        {"missing", t.missing},
                        {"unknown", t.unknown},
                        {"identity", t.identity},
                        {"over_tolerance", t.over_tolerance},
                        {"notes", t.notes}};
    std::cout << json_text(j, 2) << "\n";
    return r.outcome == Outcome::kPassed ? 0 : 1;
  }
  std::cout << outcome_name(r.outcome) << "  " << r.id << "\n";
  std::cout << "  dump      " << t.pipeline << " in " << t.dtype
            << (t.layerwise_fp8.empty() ? "" : " (layerwise fp8 " + t.layerwise_fp8 + ")") << ": "
            << t.compared << " modules compared with the fp32 reference\n";
  const Provenance& p = r.provenance;
  if (p.found && p.cause == "propagated-from-input") {
    std::cout << "  origin    " << p.detail << "\n";
  } else if (p.found) {
    std::cout << "  origin    " << p.layer << " (" << p.op << "), cause " << p.cause << ", element "
              << format_index(p.index)
              << (p.stored_layer.empty() ? "" : ", at its op " + p.stored_layer) << "\n";
    std::cout << "  values    user " << format_number(p.value) << ", reference "
              << format_number(p.reference_value) << "; max |ref| "
              << format_number(p.reference_max_abs) << "\n";
    std::cout << "  why       " << p.detail << "\n";
  } else {
    std::cout << "  result    " << r.reason << "\n";
  }
  if (!t.over_tolerance.empty())
    std::cout << "  local     past the tolerance on their own dumped inputs: "
              << first_few(t.over_tolerance) << "\n";
  if (!t.clipped.empty())
    std::cout << "  fp8       weights past e4m3's 448 (clipped by the cast): "
              << first_few(t.clipped) << "\n";
  if (!r.keep_fp32.empty())
    std::cout << "  fix       keep in fp32 (" << r.keep_fp32.size() << ", " << r.search_note
              << "): " << first_few(r.keep_fp32, 8) << "\n";
  if (!t.missing.empty())
    std::cout << "  missing   " << t.missing.size()
              << " of the graph's ops have no dumped module: " << first_few(t.missing) << "\n";
  if (!t.unknown.empty())
    std::cout << "  unknown   " << t.unknown.size()
              << " dumped modules not compared: " << first_few(t.unknown, 3) << "\n";
  for (const std::string& n : t.notes) std::cout << "  note      " << n << "\n";
  return r.outcome == Outcome::kPassed ? 0 : 1;
}

}  // namespace

Expected<int> triage_command(const TriageOptions& o) {
  if (!o.page.empty()) TP_RETURN_IF_ERROR(make_page_folder(o.page));
  if (!o.activations.empty()) return triage_dump(o);
  if (o.pipeline.empty() || o.input.empty())
    return Error(
        "triage needs --pipeline and --input (the user's configuration), or --activations DUMP "
        "(a dump of the user's own stack)");
  TP_ASSIGN_OR_RETURN(const compiled::Device device, compiled::parse_device(o.device));
  TP_ASSIGN_OR_RETURN(Model model, load_model(o.model_dir));
  TP_ASSIGN_OR_RETURN(Case c, triage_case(o, model));
  RunOptions options;
  TP_ASSIGN_OR_RETURN(options.memory_budget, memory_budget_option(o.mem));
  options.device = device;
  options.search = true;
  options.repro_file = o.repro;
  if (options.repro_file.empty()) {  // beside the report that names it, else in out/
    std::error_code ec;
    if (o.report.empty()) std::filesystem::create_directories("out", ec);
    const std::string stem =
        o.report.empty() ? "out/twinpath" : o.report.substr(0, o.report.rfind(".h5"));
    options.repro_file = stem + "-repro.safetensors";
  }
  if (!o.report.empty()) TP_RETURN_IF_ERROR(check_writable_path(o.report, "--report"));
  TP_RETURN_IF_ERROR(check_writable_path(options.repro_file, "--repro"));
  ModelCache models;
  const CaseResult r = run_case(c, options, models);
  TP_RETURN_IF_ERROR(save_triage(o, "twinpath triage", device, r));
  if (o.json) {
    std::cout << json_text(case_json(r), 2) << "\n";
  } else {
    std::cout << outcome_name(r.outcome) << "  " << r.id << "\n";
    const Provenance& p = r.provenance;
    if (p.found && p.cause == "propagated-from-input") {
      std::cout << "  origin    " << p.detail << "\n";
    } else if (p.found) {
      std::cout << "  origin    " << (p.step.empty() ? "" : p.step + ", ") << p.layer << " ("
                << p.op << "), cause " << p.cause << ", element " << format_index(p.index)
                << (p.stored_layer.empty()
                        ? ""
                        : ", stored at " + p.stored_layer + " (" + p.stored_op + ")")
                << "\n";
      std::cout << "  values    compiled " << format_number(p.value) << ", reference "
                << format_number(p.reference_value);
      if (p.dtype_max > 0)
        std::cout << "; max |ref| " << format_number(p.reference_max_abs) << " vs "
                  << format_number(p.dtype_max) << " (headroom "
                  << format_number(p.dtype_max / p.reference_max_abs) << ")";
      std::cout << "\n";
    } else if (r.outcome != Outcome::kPassed) {
      std::cout << "  reason    " << r.reason << "\n";
      if (!p.detail.empty()) std::cout << "  origin    " << p.detail << "\n";
    }
    if (r.searched) {
      const std::string keep = join_list(r.keep_fp32, ',');
      std::cout << (r.keep_fp32.empty()
                        ? "  fix       none found: " + r.search_note
                        : "  fix       --keep-fp32 '" + keep + "'  (passes; " + r.search_note + ")")
                << "\n";
    }
    if (!r.repro_file.empty()) std::cout << "  repro     twinpath replay " << r.repro_file << "\n";
    std::cout << "  case      " << r.repro << "\n";
  }
  return r.outcome == Outcome::kFailed || r.outcome == Outcome::kError ? 1 : 0;
}

Expected<int> replay_command(const std::string& file, const std::string& device) {
  TP_ASSIGN_OR_RETURN(const compiled::Device d, compiled::parse_device(device));
  TP_ASSIGN_OR_RETURN(ReplayOutcome out, replay_group_repro(file, d));
  std::cout << out.text;
  return out.non_finite ? 1 : 0;
}

}  // namespace tp
