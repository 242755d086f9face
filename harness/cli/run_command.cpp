// `twinpath run`: cases on both paths, verdicts, the terminal summary, and the reports.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "cases/suite.h"
#include "harness/cli/commands.h"
#include "harness/cli/report_command.h"
#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "harness/core/numbers.h"
#include "harness/core/untrusted_json.h"
#include "harness/runner/case_pool.h"
#include "harness/runner/case_runner.h"
#include "reports/baseline.h"
#include "reports/h5_report.h"
#include "reports/json_report.h"
#include "reports/report_tools.h"
#include "reports/result.h"
#include "reports/run_files.h"
#include "reports/run_page.h"

namespace tp {
namespace {

// SIGINT/SIGTERM (a scheduler's time limit sends SIGTERM) stop the run after the cases in
// progress; a second signal ends it at once, as the default action would. A repeat within a
// second is the same request: GNU timeout signals the process and then its whole process group,
// and a terminal's Ctrl-C reaches every process of the foreground group.
std::atomic<bool> g_stop_requested{false};
std::atomic<int> g_stop_signal{0};
std::atomic<int64_t> g_stop_nanoseconds{0};

extern "C" void request_stop(int signal) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  const int64_t ns = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
  if (!g_stop_requested) {
    g_stop_signal = signal;
    g_stop_nanoseconds = ns;
    g_stop_requested = true;
    return;
  }
  if (ns - g_stop_nanoseconds < 1000000000) return;
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// The cases an incomplete report did not run, with their ordinals, and the report to complete.
Expected<std::pair<std::vector<Case>, std::vector<int64_t>>> cases_to_resume(
    const RunReport& report, const std::string& path) {
  if (!report.incomplete)
    return Error(path + " is a complete report: every case ran; nothing to resume");
  std::vector<Case> cases;
  std::vector<int64_t> ordinals;
  for (const auto& [ordinal, id] : report.not_run) {
    auto c = parse_case(id);
    if (!c.ok())
      return Error(path + ": a case it did not run no longer parses (" + c.error().message() +
                   "); rerun the suite with this twinpath");
    cases.push_back(std::move(c).value());
    ordinals.push_back(ordinal);
  }
  return std::pair{std::move(cases), std::move(ordinals)};
}

// --resume runs the interrupted run's cases as it ran them: the run options of its stored command
// line (device, kernels, graphs, memory budget, dumps, search, contract check) apply again, and
// one given anew that differs is refused, as is a case option (model, faults, seed: the cases'
// ids hold the interrupted run's).
Status take_resumed_options(const std::string& stored, RunCommandOptions& o) {
  if (!o.model.empty() || !o.inject.empty() || o.reseed)
    return Error(
        "--resume runs the interrupted run's cases as they were, with their models, faults and "
        "seeds; leave out --model, --inject and --reseed, or start a new run with them");
  const std::vector<std::string> words = shell_split(stored);
  auto given = [&](const std::string& flag) -> std::optional<std::string> {
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i] == flag) return i + 1 < words.size() ? words[i + 1] : "";
      if (words[i].rfind(flag + "=", 0) == 0) return words[i].substr(flag.size() + 1);
    }
    return std::nullopt;
  };
  struct Option {
    const char* flag;
    std::string* value;
    std::string unset;
    bool switch_only = false;  // a flag without a value: "on" when given
  };
  std::string search = o.search ? "on" : "", no_contract = o.contract ? "" : "on";
  const Option options[] = {{"--device", &o.device, "cpu"},
                            {"--kernels", &o.kernels, ""},
                            {"--cuda-graphs", &o.cuda_graphs, ""},
                            {"--mem", &o.mem, ""},
                            {"--dump", &o.dump, "none"},
                            {"--search", &search, "", true},
                            {"--no-contract", &no_contract, "", true}};
  for (const Option& opt : options) {
    const auto stored_value = given(opt.flag);
    const std::string was =
        opt.switch_only ? (stored_value ? "on" : "") : stored_value.value_or(opt.unset);
    if (*opt.value != opt.unset && *opt.value != was)
      return Error(std::string("--resume runs the interrupted run's cases as it ran them, ") +
                   (was == opt.unset
                        ? "without " + std::string(opt.flag)
                        : "with " + std::string(opt.flag) + (opt.switch_only ? "" : " " + was)) +
                   ": leave out " + opt.flag + ", or start a new run with it");
    *opt.value = was;
  }
  o.search = search == "on";
  o.contract = no_contract != "on";
  return Status();
}

// The file a link names (out/latest.h5 -> out/runs/TIME.h5), so completing it keeps the link.
std::string resolved_link(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec)) return path;
  const auto target = std::filesystem::canonical(path, ec);
  return ec ? path : target.string();
}

}  // namespace

Expected<int64_t> memory_budget_option(const std::string& text) {
  int64_t bytes = 0;
  if (!text.empty() && !parse_memory_size(text, bytes))
    return Error("--mem " + text +
                 " is not a size: give a whole number of KiB, MiB or GiB, e.g. --mem 16GiB");
  return bytes;
}

Expected<std::vector<Case>> selected_cases(const RunCommandOptions& o) {
  std::vector<Case> all;
  for (const std::string& line : o.cases) {
    auto c = parse_case(line);
    if (!c.ok()) return Error("--case '" + line + "': " + c.error().message());
    all.push_back(std::move(c).value());
    all.back().named = true;
  }
  if (!o.suite.empty() || o.cases.empty()) {
    TP_ASSIGN_OR_RETURN(std::vector<Case> suite, load_suite(o.suite.empty() ? "ci" : o.suite));
    all.insert(all.end(), suite.begin(), suite.end());
  }
  if (all.size() > kMaxSuiteCases)
    return Error(std::to_string(all.size()) +
                 " cases (--case lines and the suite together), more than the limit of " +
                 std::to_string(kMaxSuiteCases) + "; split them into several runs");
  std::regex filter;
  try {
    filter = std::regex(o.filter.empty() ? ".*" : o.filter);
  } catch (const std::regex_error& e) {
    return Error("--filter '" + o.filter + "' is not a valid regular expression: " + e.what());
  }
  std::vector<Case> cases;
  for (Case& c : all) {
    if (!o.model.empty()) c.model = o.model;
    if (o.reseed) c.seed_variant = o.reseed;
    for (const std::string& f : split_list(o.inject, ',')) c.inject.push_back(f);
    if (std::regex_search(c.id(), filter)) cases.push_back(std::move(c));
  }
  if (all.empty())
    return Error("the suite " + o.suite +
                 " has no cases (only comments or blank lines); add case "
                 "lines (`twinpath cases options` lists what a line takes)");
  if (cases.empty())
    return Error("--filter '" + o.filter + "' matches none of the " + std::to_string(all.size()) +
                 " cases");
  return cases;
}

Expected<int> cases_list_command(const RunCommandOptions& o) {
  TP_ASSIGN_OR_RETURN(std::vector<Case> cases, selected_cases(o));
  for (const Case& c : cases) std::cout << c.id() << "\n";
  std::cerr << cases.size() << " cases\n";
  return 0;
}

namespace {

// A non-negative whole number from a scheduler's variable, or why not.
Expected<int> scheduler_number(const char* name, const char* text) {
  if (const std::optional<int> value = parse_number<int>(text); value && *value >= 0) return *value;
  return Error(std::string(name) + "='" + excerpt(text) +
               "' is not a whole number; fix the job's environment or pass --shard K/N");
}

// The shard a scheduler gave this process, as "K/N", or "" when none did. In order: GoogleTest's
// variables, a Slurm job array (the task's place in the array, so --array=1-3 and --array=0-10:5
// work), a Kubernetes indexed Job (its count from TWINPATH_SHARD_COUNT, which the manifest sets
// to the Job's completions: Kubernetes passes the index alone).
Expected<std::string> shard_from_environment() {
  const auto env = [](const char* name) { return std::getenv(name); };
  if (env("GTEST_TOTAL_SHARDS") && env("GTEST_SHARD_INDEX"))
    return std::string(env("GTEST_SHARD_INDEX")) + "/" + env("GTEST_TOTAL_SHARDS");
  if (const char* id = env("SLURM_ARRAY_TASK_ID")) {
    const char* count = env("SLURM_ARRAY_TASK_COUNT");
    if (!count)
      return Error(
          "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (Slurm before 17.11?); "
          "pass --shard $SLURM_ARRAY_TASK_ID/N yourself");
    TP_ASSIGN_OR_RETURN(int task, scheduler_number("SLURM_ARRAY_TASK_ID", id));
    TP_ASSIGN_OR_RETURN(int total, scheduler_number("SLURM_ARRAY_TASK_COUNT", count));
    int first = 0, step = 1;
    if (const char* min = env("SLURM_ARRAY_TASK_MIN")) {
      TP_ASSIGN_OR_RETURN(first, scheduler_number("SLURM_ARRAY_TASK_MIN", min));
    }
    if (const char* s = env("SLURM_ARRAY_TASK_STEP")) {
      TP_ASSIGN_OR_RETURN(step, scheduler_number("SLURM_ARRAY_TASK_STEP", s));
    }
    if (step < 1 || task < first || (task - first) % step != 0)
      return Error("SLURM_ARRAY_TASK_ID=" + std::string(id) +
                   " is not a task of an evenly stepped array (--array=FIRST-LAST[:STEP]); submit "
                   "such an array, or pass --shard K/N");
    return std::to_string((task - first) / step) + "/" + std::to_string(total);
  }
  if (const char* index = env("JOB_COMPLETION_INDEX")) {
    const char* count = env("TWINPATH_SHARD_COUNT");
    if (!count)
      return Error(
          "JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job) but TWINPATH_SHARD_COUNT "
          "is not; set it in the manifest to the Job's completions "
          "(tools/k8s/twinpath-shards.yaml)");
    return std::string(index) + "/" + count;
  }
  return std::string();
}

}  // namespace

Expected<Shard> parse_shard(const std::string& flag) {
  std::string text = flag;
  if (text.empty()) {
    TP_ASSIGN_OR_RETURN(text, shard_from_environment());
  }
  if (text.empty()) return Shard{};
  if (auto s = parse_shard_spec(text)) return *s;
  const std::size_t slash = text.find('/');
  const bool shaped = slash != std::string::npos && slash > 0 && slash + 1 < text.size() &&
                      text.find_first_not_of("0123456789/") == std::string::npos &&
                      text.find('/', slash + 1) == std::string::npos;
  if (shaped)
    return Error("shard " + text + " is out of range: N (the number of shards) is at least 1 and " +
                 "K counts from 0 to N-1, e.g. --shard 0/4");
  return Error(
      "shard '" + text +
      "' is not K/N; use --shard K/N with 0 <= K < N (or a scheduler's variables: "
      "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS, a Slurm job array, a Kubernetes indexed Job)");
}

namespace {

// --kernels and --cuda-graphs over the environment's defaults; refused without --device cuda.
Expected<CudaChoice> cuda_choice_option(const RunCommandOptions& o, compiled::Device device) {
  if (device != compiled::Device::kCuda && (!o.kernels.empty() || !o.cuda_graphs.empty()))
    return Error(
        "--kernels and --cuda-graphs choose how the CUDA backend runs; add --device cuda, or drop "
        "them");
  if (device != compiled::Device::kCuda) return CudaChoice{};
  TP_ASSIGN_OR_RETURN(CudaChoice choice, compiled::cuda_choice_from_environment());
  if (!o.kernels.empty()) {
    TP_ASSIGN_OR_RETURN(choice.kernels, parse_cuda_kernels(o.kernels, "--kernels "));
  }
  if (!o.cuda_graphs.empty()) {
    TP_ASSIGN_OR_RETURN(choice.graphs, parse_cuda_graphs(o.cuda_graphs, "--cuda-graphs "));
  }
  return choice;
}

}  // namespace

RunReport report_header(const std::string& command_line, compiled::Device device) {
  RunReport report;
  report.tool_version = TWINPATH_VERSION_STRING;
  report.git_commit = TWINPATH_GIT_COMMIT_STRING;
  report.command_line = command_line;
  report.host = host_name();
  report.device = compiled::device_report_name(device);
  report.utc_time = utc_now();
  return report;
}

Expected<int> run_command(const RunCommandOptions& given, const std::string& command_line) {
  // Without --report, the run's own files under out/ (reports/run_files.h): out/latest.h5 and
  // out/latest.xml link the newest, and no run replaces another's.
  RunCommandOptions o = given;
  const bool own_files = o.report.empty() && o.resume.empty();
  const bool own_junit = own_files && o.junit.empty();
  // A resumed run takes its cases and run options from the report it completes.
  RunReport resumed;
  if (!o.resume.empty()) {
    if (!o.cases.empty() || !o.suite.empty() || !o.filter.empty() || !o.shard.empty())
      return Error(
          "--resume takes its cases from the report; leave out --case, --suite, --filter and "
          "--shard");
    TP_ASSIGN_OR_RETURN(resumed, read_report_file(o.resume));
    TP_RETURN_IF_ERROR(take_resumed_options(resumed.command_line, o));
  }
  TP_ASSIGN_OR_RETURN(const compiled::Device device, compiled::parse_device(o.device));
  TP_ASSIGN_OR_RETURN(const CudaChoice cuda, cuda_choice_option(o, device));
  DumpPolicy dump = DumpPolicy::kNone;
  if (o.dump == "failing")
    dump = DumpPolicy::kFailing;
  else if (o.dump == "all")
    dump = DumpPolicy::kAll;
  else if (o.dump != "none")
    return Error("--dump " + o.dump + " is unknown; use none, failing or all");
  TP_ASSIGN_OR_RETURN(Shard shard, parse_shard(o.shard));
  std::vector<Case> cases;
  std::vector<int64_t> resumed_ordinals;
  if (!o.resume.empty()) {
    TP_ASSIGN_OR_RETURN(auto todo, cases_to_resume(resumed, o.resume));
    cases = std::move(todo.first);
    resumed_ordinals = std::move(todo.second);
    if (o.report.empty()) o.report = resolved_link(o.resume);
  } else {
    TP_ASSIGN_OR_RETURN(cases, selected_cases(o));
  }
  if (!o.page.empty()) TP_RETURN_IF_ERROR(make_page_folder(o.page));
  if (!own_files) TP_RETURN_IF_ERROR(check_writable_path(o.report, "--report"));
  if (!own_junit && !o.junit.empty()) TP_RETURN_IF_ERROR(check_writable_path(o.junit, "--junit"));
  // Read the baseline first: a wrong path should not cost a whole run.
  RunReport baseline;
  if (!o.baseline.empty()) {
    TP_ASSIGN_OR_RETURN(baseline, read_report_file(o.baseline, true));
  }

  RunReport report = report_header(command_line, device);
  if (device == compiled::Device::kCuda) report.backend = cuda.text();
  if (shard.total > 1)
    report.shard = std::to_string(shard.index) + "/" + std::to_string(shard.total);
  if (!o.resume.empty()) {
    report.command_line = resumed.command_line;  // the run it completes, with every option
    report.shard = resumed.shard;
    report.cases = resumed.cases;
  }

  std::ostream& progress = o.json ? std::cerr : std::cout;
  RunOptions options;
  TP_ASSIGN_OR_RETURN(options.memory_budget, memory_budget_option(o.mem));
  options.device = device;
  options.cuda = cuda;
  options.dump = dump;
  options.search = o.search;
  if (o.contract) options.contract = contract_checker();
  std::vector<const Case*> mine;  // this shard's cases
  std::vector<int64_t> ordinals;
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (!o.resume.empty()) {
      mine.push_back(&cases[i]);
      ordinals.push_back(resumed_ordinals[i]);
    } else if (int(i % std::size_t(shard.total)) == shard.index) {
      mine.push_back(&cases[i]);
      ordinals.push_back(int64_t(i));
    }
  TP_ASSIGN_OR_RETURN(const int jobs, resolve_jobs(o.jobs, mine, device));
  ModelCache models;
  TP_RETURN_IF_ERROR(check_cases_before_running(mine, models));
  g_stop_requested = false;
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  int named_refusals = 0;  // cases given by --case that did not run
  const std::size_t ran = run_cases(
      mine, options, jobs, models,
      [&](std::size_t i, CaseResult r) {
        r.ordinal = ordinals[i];
        const bool refused = r.outcome == Outcome::kUnsupported || r.outcome == Outcome::kSkipped;
        named_refusals += refused && mine[i]->named;
        if (r.outcome != Outcome::kUnsupported || mine[i]->named)
          progress << case_lines(r) << std::flush;  // suites' refusals are counted at the end
        report.cases.push_back(std::move(r));
      },
      &g_stop_requested);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::stable_sort(report.cases.begin(), report.cases.end(),
                   [](const CaseResult& a, const CaseResult& b) { return a.ordinal < b.ordinal; });
  if (ran < mine.size()) {
    report.incomplete = true;
    for (std::size_t i = ran; i < mine.size(); ++i)
      report.not_run.emplace_back(ordinals[i], mine[i]->id());
  }
  if (own_files) {
    TP_ASSIGN_OR_RETURN(const RunFiles files, write_run_files("out", report, own_junit));
    o.report = files.report;
    if (own_junit) o.junit = files.junit;
  } else {
    TP_RETURN_IF_ERROR(write_h5_report(o.report, report));
  }
  if (!o.junit.empty() && !own_junit) TP_RETURN_IF_ERROR(write_junit(o.junit, report));
  if (report.incomplete)
    progress << "interrupted by " << (g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM") << " after "
             << ran << " of " << mine.size()
             << " cases; the report keeps them, marked incomplete: `twinpath run --resume "
             << shell_quote(o.report) << "` runs the other " << mine.size() - ran << "\n";
  bool regressed = false;
  if (!o.baseline.empty()) {
    const auto findings = diff_reports(baseline, report, DiffOptions{o.growth});
    for (const DiffFinding& f : findings)
      progress << "GREW        " << f.case_id << (f.checkpoint.empty() ? "" : " @ " + f.checkpoint)
               << "\n    " << f.what << "\n";
    progress << findings.size() << " regressions against " << o.baseline << "\n";
    regressed = !findings.empty();
  }
  progress << "report: " << o.report
           << (own_files ? " (out/latest.h5 links the newest run's; out/runs keeps the last " +
                               std::to_string(kKeptRuns) + ")"
                         : "")
           << "\n";
  if (!o.junit.empty()) progress << "junit: " << o.junit << "\n";
  if (!o.page.empty()) {
    PageOptions page;
    if (!o.baseline.empty()) page.baseline = &baseline, page.baseline_name = o.baseline;
    page.growth = o.growth;
    TP_ASSIGN_OR_RETURN(const std::string written, write_run_page(o.page, report, page));
    progress << "page: " << written << "\n";
  }
  if (o.json) std::cout << json_text(run_json(report), 2) << "\n";
  if (const std::string refused = refusal_summary(report.cases); !refused.empty())
    progress << refused << "\n";
  if (const std::string searched = input_search_summary(report.cases); !searched.empty())
    progress << searched << "\n";
  progress << outcome_counts(report.cases) << "\n";
  if (report.incomplete) return 128 + g_stop_signal;  // as the signal's own exit status
  if (any_failure(report.cases) || regressed) return 1;
  if (named_refusals) {
    progress << named_refusals << " of the cases given by --case could not run here (the reason "
             << "and repro are above)\n";
    return 2;
  }
  return 0;
}

}  // namespace tp
