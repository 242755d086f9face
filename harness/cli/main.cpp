// twinpath: runs diffusion pipelines on independent paths and compares them.
// main() parses flags and picks the exit code: 0 success, 1 a case failed, 2 usage or input
// error (or a case given by `run --case` that cannot run here), 3 a twinpath bug.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "compiled/faults.h"
#include "harness/cli/commands.h"
#include "harness/core/format.h"
#include "harness/core/mapped_files.h"
#include "harness/models/config_space.h"
#include "harness/models/family.h"

namespace {

int report(const tp::Status& s) {
  if (s.ok()) return 0;
  std::cerr << "twinpath: error: " << s.error().message() << "\n";
  return s.error().kind() == tp::ErrorKind::kInternal ? 3 : 2;
}

// OpenMP threads that finish a parallel region spin, by default, for the next one. With a
// neighbour at the same priority on the cores (another job on a shared CI runner, another test)
// a spinning thread takes the core the thread doing the work needs: a sample of 20 ci cases took
// 35.7 s instead of 4.7 s beside a build on this 2-core machine (docs/benchmarks.md, "Threads").
// libgomp reads OMP_WAIT_POLICY once, as it loads, so the commands that compute run themselves
// again with it set to passive, unless the user chose a policy (OMP_WAIT_POLICY=active keeps
// spinning). The process keeps its pid.
void wait_passively_between_parallel_regions(int argc, char** argv) {
  if (argc < 2 || std::getenv("OMP_WAIT_POLICY")) return;
  const std::string command = argv[1];
  if (command != "run" && command != "triage" && command != "tradeoff" && command != "exec") return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

// A subcommand and what it does once parsed (the command line in hand): an exit code.
struct Command {
  CLI::App* app;
  std::function<int(const std::string& command_line)> action;
};

// A checkpoint written in place while the command read tensors mapped from it
// (harness/core/mapped_files.h): what the command computed, and wrote, may mix the file's old
// and new values.
int refuse_if_inputs_changed(int code) {
  const std::vector<std::string> changed = tp::mapped_files::changed_files();
  if (changed.empty()) return code;
  std::cerr << "twinpath: error: " << changed[0]
            << " changed on disk while this command read tensors mapped from it; what it computed "
               "and wrote may mix the file's old and new values: rerun once nothing writes to that "
               "file\n";
  return 2;
}

int exit_code(const tp::Expected<int>& code) { return code.ok() ? *code : report(code.error()); }

// model init: a model folder with seeded weights.
void add_model_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* model = app.add_subcommand("model", "Make model folders (diffusers layout)");
  model->require_subcommand(1);
  CLI::App* init = model->add_subcommand("init", "Write a model folder with seeded random weights");
  struct InitOptions {
    std::string config, random, out_dir, scale_layer;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<InitOptions>();
  std::string builtins;
  for (const std::string& name : tp::builtin_config_names()) builtins += name + " | ";
  CLI::Option* config = init->add_option("--config", o->config, builtins + "path/to/config.json");
  CLI::Option* random = init->add_option(
      "--random", o->random,
      "FAMILY:SEED: a config drawn from the family's space of valid configs (" +
          tp::comma_list(tp::config_space_names()) +
          "), as a case's model=random:FAMILY:SEED@WEIGHT_SEED with --seed WEIGHT_SEED");
  config->excludes(random);
  init->add_option("--seed", o->seed, "seed for the weights (same seed, same weights)")
      ->capture_default_str();
  init->add_option(
      "--scale-layer", o->scale_layer,
      "LAYER*FACTOR: multiply one layer's weights (e.g. to overflow f16 as the SDXL VAE does); "
      "prints the layer's output range on the reference and the factor from which it leaves "
      "f16 and bf16");
  init->add_option("--out", o->out_dir,
                   "folder to write config.json and diffusion_pytorch_model.safetensors")
      ->required();

  commands.push_back(
      {init, [o](const std::string&) {
         if (o->config.empty() && o->random.empty())
           return report(
               tp::Error("model init needs --config NAME_OR_PATH or --random FAMILY:SEED"));
         const std::string config =
             o->random.empty() ? o->config : tp::kRandomConfigPrefix + o->random;
         return report(tp::model_init_command(config, o->seed, o->out_dir, o->scale_layer));
       }});
  CLI::App* space = model->add_subcommand(
      "space", "List each family's space of drawn configs (model=random:FAMILY:SEED)");
  auto family = std::make_shared<std::string>();
  space->add_option("family", *family, "one family: its keys and one draw's config.json");
  commands.push_back(
      {space, [family](const std::string&) { return report(tp::model_space_command(*family)); }});
}

// exec: one pipeline on one path.
void add_exec_command(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* exec = app.add_subcommand("exec", "Run one pipeline on one path and write its output");
  auto ex = std::make_shared<tp::ExecOptions>();
  exec->add_option("--model", ex->model_dir, "diffusers model folder")->required();
  exec->add_option("--pipeline", ex->pipeline, tp::pipeline_choices())->required();
  exec->add_option("--path", ex->path,
                   "reference | reference:fp64 | torch | torch:fp64 | compiled:cpu | compiled:cuda")
      ->capture_default_str();
  exec->add_option(
          "--policy", ex->compiled.policy,
          "compiled path dtype policy: w=f32|f16|bf16|f8e4m3|f8e5m2,a=f32|f16|bf16,acc=f32|f16"
          "[,scale=channel|tensor][,sat=satfinite|nonsat][,clip=Q] or w=f8e4m3,a=bf16,acc=f32,"
          "cast=layerwise[,sat=...] (diffusers' layerwise casting)")
      ->capture_default_str();
  exec->add_option("--keep-fp32", ex->compiled.keep_fp32,
                   "module globs kept in fp32, comma-separated (e.g. 'decoder.up_blocks.3.*')");
  exec->add_option("--cast-skip", ex->compiled.cast_skip,
                   "cast=layerwise: module globs left out of the casting, comma-separated, "
                   "replacing diffusers' list (its defaults and the model's own)");
  exec->add_option("--load", ex->compiled.load,
                   "cast=layerwise: the dtype the model was loaded in before the casting "
                   "(default the activation dtype); the layers the casting skips keep it");
  exec->add_option("--fuse-qkv", ex->compiled.fuse_qkv,
                   "cast=layerwise: when fuse_qkv_projections() ran, before-cast or after-cast "
                   "(the fused Linears then keep fp8 weights: refused)");
  std::string faults_help = "deliberate faults in the compiled path, comma-separated:";
  for (const tp::compiled::FaultInfo& f : tp::compiled::all_faults())
    faults_help += std::string("\n  ") + f.name + ": " + f.description;
  exec->add_option("--inject", ex->compiled.inject, faults_help);
  exec->add_option("--tiling", ex->tiling,
                   "on | off: diffusers' tiled encode/decode (enable_tiling)")
      ->capture_default_str();
  exec->add_option("--tile-min", ex->tile_min,
                   "tile size in image pixels (default: the config's sample_size; 512 for Tiny)");
  exec->add_option("--tile-stride", ex->tile_stride,
                   "pixels between tiles (default: from diffusers' overlap factor)");
  exec->add_option("--framewise", ex->framewise,
                   "on | off: a video VAE's tiling in time (diffusers' use_framewise_encoding/"
                   "decoding, on by default)")
      ->capture_default_str();
  exec->add_option("--tile-min-frames", ex->tile_min_frames,
                   "a video VAE's temporal tile in video frames (default 16)");
  exec->add_option("--tile-stride-frames", ex->tile_stride_frames,
                   "video frames between temporal tiles (default 12)");
  tp::add_family_flags(*exec, ex->family);
  exec->add_flag("--validate-plan", ex->compiled.validate_plans,
                 "check every compiled plan before it runs (liveness, arena overlaps, dtypes); "
                 "twinpath run always does");
  exec->add_option("--save-plan", ex->compiled.save_plan,
                   "write the compiled plans to this file after the run");
  exec->add_option(
      "--load-plan", ex->compiled.load_plan,
      "use the plans in this file (made by --save-plan with the same model and options)");
  exec->add_option(
          "--shape-policy", ex->compiled.shape_policy,
          "exact | bucket:N (plans sized to the image rounded up to a multiple of N pixels)")
      ->capture_default_str();
  exec->add_option("--input", ex->input, "input .safetensors or .npy (image in [-1,1] or latent)")
      ->required();
  exec->add_option("--output", ex->output, "output .safetensors (or .npy for one tensor)")
      ->required();
  exec->add_option("--repeat", ex->repeat,
                   "make the call N times (benchmarks): the first call's time, then the best of "
                   "the others (warm: plans, buffers and caches in place), as a benchmark peer "
                   "that times calls after an untimed one does")
      ->capture_default_str();

  commands.push_back({exec, [ex](const std::string&) { return report(tp::exec_command(*ex)); }});
}

// run: cases on both paths, compared and reported.
void add_run_command(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* run = app.add_subcommand(
      "run", "Run cases on the reference and compiled paths, compare, and report");
  auto ro = std::make_shared<tp::RunCommandOptions>();
  run->add_option(
      "--case", ro->cases,
      "a case line (repeatable): PIPELINE key=value ... (`twinpath cases options` lists them); "
      "one that cannot run here prints why with its repro and the run exits 2");
  run->add_option(
      "--suite", ro->suite,
      "ci (default) | nightly | field-reports | selftest | FILE of case lines and sweeps");
  run->add_option("--filter", ro->filter,
                  "run only cases whose id matches this regular expression");
  run->add_option("--model", ro->model,
                  "run every case on this model (built-in name or diffusers folder)");
  run->add_option("--device", ro->device, "cpu (the compiled path's emulated kernels) | cuda")
      ->capture_default_str();
  run->add_option("--kernels", ro->kernels,
                  "per-op | fused: the CUDA kernel set where a case has no kernels= (default: "
                  "TWINPATH_CUDA_KERNELS, else fused)");
  run->add_option("--cuda-graphs", ro->cuda_graphs,
                  "on | off: replay each plan as a CUDA graph where a case has no graphs= "
                  "(default: TWINPATH_CUDA_GRAPHS=0 off, else on)");
  run->add_option("--inject", ro->inject,
                  "faults added to every case, comma-separated (see `exec --help`)");
  run->add_option("--reseed", ro->reseed,
                  "give every case seed=N: the same cases on other seeded inputs");
  run->add_option("--shard", ro->shard,
                  "K/N: run every N-th case from the K-th (0 <= K < N); default from "
                  "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS");
  run->add_option("--jobs", ro->jobs,
                  "cases run concurrently, the threads divided among them: a number, or auto "
                  "(one per thread when every case is on a built-in tiny model or a drawn config "
                  "(random:FAMILY:SEED) on the CPU, else 1)")
      ->capture_default_str();
  run->add_option("--report", ro->report,
                  "write the HDF5 report here (atomically); without it, out/runs/TIME.h5 and "
                  "TIME.xml, linked as out/latest.h5 and out/latest.xml (the last 10 runs kept)");
  run->add_option("--page", ro->page,
                  "also write the report as one HTML page, DIR/report.html: the summary (with "
                  "--baseline, its regressions) and a section per failing case (every case in a "
                  "run of up to 40)");
  run->add_option("--resume", ro->resume,
                  "REPORT.h5 of a run stopped by SIGINT/SIGTERM: run only the cases it did not "
                  "(pass the run's other options again) and write the complete report (to "
                  "--report, else over REPORT.h5)");
  run->add_option("--junit", ro->junit,
                  "write JUnit XML here (atomically); default: beside the run's own report when "
                  "there is no --report");
  run->add_option("--baseline", ro->baseline,
                  "an earlier report or a baseline file (report baseline): flag error growth, new "
                  "non-finite values, worse outcomes and changed plans against it");
  run->add_option("--growth", ro->growth, "with --baseline: the error growth ratio flagged")
      ->capture_default_str();
  run->add_option("--dump", ro->dump,
                  "none | failing | all: store checkpoint tensors in the report")
      ->capture_default_str();
  run->add_flag("--search", ro->search,
                "for failing cases, search the smallest --keep-fp32 list that passes");
  run->add_flag("!--no-contract", ro->contract,
                "skip the check of every group against the numerics contract (LibTorch's "
                "contract mode)");
  run->add_option(
      "--mem", ro->mem,
      "the memory a case may use, e.g. 16GiB (a case's mem= overrides it); a case estimated past "
      "it is refused before it allocates. Default: the available memory less 10%");
  run->add_flag("--json", ro->json, "print one JSON object on stdout (progress goes to stderr)");

  commands.push_back(
      {run, [ro](const std::string& line) { return exit_code(tp::run_command(*ro, line)); }});
}

// cases list, cases options.
void add_cases_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* cases_cmd = app.add_subcommand("cases", "Suites and their expanded cases");
  cases_cmd->require_subcommand(1);
  CLI::App* list = cases_cmd->add_subcommand(
      "list", "Print the expanded case lines of a suite (one id per line)");
  auto lo = std::make_shared<tp::RunCommandOptions>();
  list->add_option("--suite", lo->suite,
                   "ci (default) | nightly | field-reports | selftest | FILE");
  list->add_option("--filter", lo->filter, "only ids matching this regular expression");
  CLI::App* options = cases_cmd->add_subcommand(
      "options", "Print every option a case line takes, in id order, with its syntax");

  commands.push_back(
      {list, [lo](const std::string&) { return exit_code(tp::cases_list_command(*lo)); }});
  commands.push_back({options, [](const std::string&) {
                        std::cout << tp::case_options_help();
                        return 0;
                      }});
}

// plan show.
void add_plan_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* plan_cmd = app.add_subcommand("plan", "The compiled plans of a case");
  plan_cmd->require_subcommand(1);
  CLI::App* plan_show = plan_cmd->add_subcommand(
      "show", "Print a case's plans, group by group, with each group's numerics contract");
  auto line = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  plan_show->add_option("--case", *line, "the case line")->required();
  plan_show->add_flag("--json", *json, "print JSON");

  commands.push_back({plan_show, [line, json](const std::string&) {
                        return exit_code(tp::plan_show_command(*line, *json));
                      }});
}

// triage, and replay of the repro it writes.
void add_triage_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* triage = app.add_subcommand(
      "triage", "Find where a user's NaN comes from, why, and which layers to keep in fp32");
  auto to = std::make_shared<tp::TriageOptions>();
  triage->add_option("--model", to->model_dir, "the user's diffusers model folder")->required();
  triage->add_option("--pipeline", to->pipeline,
                     tp::pipeline_choices() + " (not with --activations)");
  triage->add_option("--input", to->input,
                     "the user's input: .png, .safetensors or .npy (not with --activations)");
  triage->add_option("--activations", to->activations,
                     "a dump of the user's own stack (tools/dump_activations.py): compare each "
                     "module's output with the reference, name the first that went non-finite");
  triage->add_option("--policy", to->policy, "the user's dtype policy (as exec --policy)")
      ->capture_default_str();
  triage->add_option("--keep-fp32", to->keep_fp32, "module globs the user already keeps in fp32");
  triage->add_option("--inject", to->inject, "deliberate faults (to rehearse a triage)");
  triage->add_option("--tiling", to->tiling, "on | off")->capture_default_str();
  triage->add_option("--device", to->device, "cpu | cuda: where the compiled path runs")
      ->capture_default_str();
  tp::add_family_flags(*triage, to->family);
  triage->add_option("--report", to->report, "also write an HDF5 report");
  triage->add_option("--page", to->page,
                     "also write the report as one HTML page, DIR/report.html: the origin, the "
                     "path of the non-finite values, what to keep in fp32, the error per layer");
  triage->add_option("--mem", to->mem,
                     "the memory the triage may use, e.g. 16GiB; default: the available memory "
                     "less 10%");
  triage->add_option("--repro", to->repro,
                     "where to write the origin group's minimal repro (for `twinpath replay`); "
                     "default: beside --report "
                     "as NAME-repro.safetensors, else out/twinpath-repro.safetensors");
  triage->add_flag(
      "--json", to->json,
      "print one JSON object: outcome, origin.layer/op/cause/index/reference_value, keep_fp32");

  commands.push_back(
      {triage, [to](const std::string&) { return exit_code(tp::triage_command(*to)); }});
  CLI::App* replay = app.add_subcommand(
      "replay", "Run the minimal repro `triage` wrote: the origin group alone, op by op");
  auto file = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>("cpu");
  replay->add_option("file", *file, "the repro .safetensors")->required();
  replay->add_option("--device", *device, "cpu | cuda")->capture_default_str();

  commands.push_back({replay, [file, device](const std::string&) {
                        return exit_code(tp::replay_command(*file, *device));
                      }});
}

// tradeoff: error and speed per policy and resolution.
void add_tradeoff_command(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* tradeoff = app.add_subcommand(
      "tradeoff", "Error and speed per dtype policy and resolution: report.h5 and report.html");
  auto tr = std::make_shared<tp::TradeoffCommandOptions>();
  tradeoff
      ->add_option("--model", tr->model,
                   "built-in name (tiny-kl, sd-kl, ...) or diffusers model folder")
      ->required();
  tradeoff->add_option(
      "--pipeline", tr->pipeline,
      tp::pipeline_choices() + " (default: the model family's, e.g. a VAE's decode)");
  tradeoff->add_option(
      "--policy", tr->policies,
      "a dtype policy (repeatable), e.g. 'w=f16,a=f16,acc=f32'; default: every supported one");
  tradeoff->add_option("--res", tr->resolutions, "image resolutions, comma-separated HEIGHTxWIDTH")
      ->capture_default_str();
  tradeoff
      ->add_option("--repeats", tr->repeats,
                   "timed runs per point after one warm-up (the median is reported)")
      ->capture_default_str();
  tradeoff->add_option("--device", tr->device, "cpu (the emulated kernels) | cuda")
      ->capture_default_str();
  tradeoff->add_option("--out", tr->out, "folder for report.h5 and report.html")->required();
  tradeoff->add_option("--mem", tr->mem,
                       "the memory each resolution may use, e.g. 16GiB; one estimated past it is "
                       "refused before it allocates (default: available memory less 10%)");
  tp::add_family_flags(*tradeoff, tr->family);

  commands.push_back({tradeoff, [tr](const std::string& line) {
                        return exit_code(tp::tradeoff_command(*tr, line));
                      }});
}

// selftest: a GPU owner's check of the CUDA kernels.
void add_selftest_command(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* selftest = app.add_subcommand(
      "selftest",
      "Check this machine's GPU: the selftest suite on the CUDA kernels (both kernel sets, "
      "reruns for the same bits) with the numerics contract; a report and summary.md");
  auto so = std::make_shared<tp::SelftestOptions>();
  selftest->add_option("--device", so->device, "cuda")->capture_default_str();
  selftest->add_option("--out", so->out, "folder for selftest.h5, selftest.xml and summary.md")
      ->capture_default_str();
  commands.push_back({selftest, [so](const std::string& line) {
                        return exit_code(tp::selftest_command(*so, line));
                      }});
}

// report show, diff, baseline, page, merge (the reports and the core only).
void add_report_commands(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* report_cmd = app.add_subcommand("report", "Read, compare and join HDF5 reports");
  report_cmd->require_subcommand(1);
  CLI::App* show = report_cmd->add_subcommand("show", "Print a report's cases and summary");
  auto show_file = std::make_shared<std::string>();
  auto show_json = std::make_shared<bool>(false), show_layers = std::make_shared<bool>(false);
  show->add_option("file", *show_file, "report .h5")->required();
  show->add_flag("--json", *show_json,
                 "print one JSON object (each case's outcome, failing checkpoints and worst one)");
  show->add_flag("--layers", *show_layers,
                 "every checkpoint's judged error, tolerance and margin, not only the worst");
  commands.push_back({show, [show_file, show_json, show_layers](const std::string&) {
                        return exit_code(
                            tp::report_show_command(*show_file, *show_json, *show_layers));
                      }});
  CLI::App* diff = report_cmd->add_subcommand(
      "diff", "Flag error growth, new non-finite values and worse outcomes from BASE to NEW");
  struct DiffOptions {
    std::string base, after;
    double growth = 2;
    bool json = false;
  };
  auto d = std::make_shared<DiffOptions>();
  diff->add_option("base", d->base, "the baseline report (or baseline file)")->required();
  diff->add_option("new", d->after, "the report to review")->required();
  diff->add_option("--growth", d->growth, "flag rel L2 that grew by more than this factor")
      ->capture_default_str();
  diff->add_flag("--json", d->json, "print one JSON object: the regressions and unmatched cases");
  commands.push_back({diff, [d](const std::string&) {
                        return exit_code(
                            tp::report_diff_command(d->base, d->after, d->growth, d->json));
                      }});
  CLI::App* baseline_cmd = report_cmd->add_subcommand(
      "baseline",
      "Write a report's summary (outcomes, plan facts, per-checkpoint error) as a baseline file "
      "for run --baseline");
  auto baseline = std::make_shared<std::pair<std::string, std::string>>();  // report, out
  baseline_cmd->add_option("report", baseline->first, "an HDF5 report")->required();
  baseline_cmd->add_option("--out", baseline->second, "the baseline file")->required();
  commands.push_back({baseline_cmd, [baseline](const std::string&) {
                        return exit_code(
                            tp::report_baseline_command(baseline->first, baseline->second));
                      }});
  CLI::App* page = report_cmd->add_subcommand(
      "page", "Draw a report as one self-contained HTML page (DIR/report.html)");
  struct PageCommand {
    std::string report, out, case_id, baseline;
    bool failing = false;
    double growth = 2;
  };
  auto pg = std::make_shared<PageCommand>();
  page->add_option("report", pg->report, "an HDF5 report (run or triage)")->required();
  page->add_option("--out", pg->out, "the folder for report.html")->required();
  page->add_option("--case", pg->case_id, "draw only this case (its id, as report show prints it)");
  page->add_flag("--failing", pg->failing, "draw only the cases that did not pass");
  page->add_option("--baseline", pg->baseline,
                   "an earlier report or baseline file: list the regressions against it");
  page->add_option("--growth", pg->growth, "with --baseline: the error growth ratio flagged")
      ->capture_default_str();
  commands.push_back({page, [pg](const std::string&) {
                        return exit_code(tp::report_page_command(pg->report, pg->out, pg->case_id,
                                                                 pg->failing, pg->baseline,
                                                                 pg->growth));
                      }});
  CLI::App* merge = report_cmd->add_subcommand("merge", "Join shard reports into one");
  auto merged = std::make_shared<std::pair<std::vector<std::string>, std::string>>();
  merge->add_option("inputs", merged->first, "shard reports")->required();
  merge->add_option("--out", merged->second, "the merged report")->required();
  commands.push_back({merge, [merged](const std::string&) {
                        return exit_code(tp::report_merge_command(merged->first, merged->second));
                      }});
}

}  // namespace

int main(int argc, char** argv) {
  wait_passively_between_parallel_regions(argc, argv);
  CLI::App app{"twinpath: numerical validation and differential testing of diffusion pipelines"};
  app.set_version_flag(
      "--version", std::string("twinpath ") + TWINPATH_VERSION + " (" + TWINPATH_GIT_COMMIT + ")");
  app.require_subcommand(1);
  std::vector<Command> commands;
  for (auto add : {add_model_commands, add_exec_command, add_run_command, add_cases_commands,
                   add_plan_commands, add_triage_commands, add_tradeoff_command,
                   add_selftest_command, add_report_commands})
    add(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  std::string line = "twinpath";
  for (int i = 1; i < argc; ++i) line += " " + tp::shell_quote(argv[i]);  // pasted back as is
  try {
    for (const Command& c : commands)
      if (c.app->parsed()) return refuse_if_inputs_changed(c.action(line));
  } catch (const tp::InternalError& e) {
    std::cerr << "twinpath: internal error (a bug; please report it): " << e.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {
    std::cerr << "twinpath: error: out of memory; use a smaller resolution or batch\n";
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A name the system refuses (past 255 characters a name, 4096 a path) or cannot reach.
    std::cerr << "twinpath: error: cannot use the path '" << tp::excerpt(e.path1().string(), 60)
              << "' (" << e.path1().string().size() << " characters): " << e.code().message()
              << "; check the name (the system allows 255 characters a name, 4096 a path)\n";
    return 2;
  }
  return 2;
}
