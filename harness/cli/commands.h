// Subcommands of the twinpath binary. main() only parses flags; these do the work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cases/case.h"
#include "compiled/backend.h"
#include "harness/cli/family_flags.h"
#include "harness/cli/paths.h"
#include "harness/cli/report_command.h"
#include "harness/core/shard.h"
#include "harness/core/status.h"
#include "reports/report.h"

namespace tp {

struct ExecOptions {
  std::string model_dir;
  std::string pipeline;
  std::string path = "reference";
  std::string input;
  std::string output;
  CompiledOptions compiled;
  std::string tiling = "off";
  int64_t tile_min = 0, tile_stride = 0;
  std::string framewise = "on";  // a video VAE's tiling in time
  int64_t tile_min_frames = 0, tile_stride_frames = 0;
  FamilyFlags family;  // the pipeline's family options (--steps, --vae DIR, ...)
  int64_t repeat = 1;  // calls made: the first timed cold, the best of the others warm
};

struct RunCommandOptions {
  std::vector<std::string> cases;  // --case, repeatable
  std::string suite;               // a file of case lines
  std::string filter;              // regex over case ids
  std::string model;               // replaces every case's model
  std::string device = "cpu";
  // --device cuda: the kernel set and CUDA graphs where a case does not say ("": the
  // environment's TWINPATH_CUDA_KERNELS and TWINPATH_CUDA_GRAPHS, else fused and on).
  std::string kernels, cuda_graphs;
  std::string inject;         // faults added to every case
  int64_t reseed = 0;         // seed=N added to every case (other inputs, same cases)
  std::string shard;          // K/N; else GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS
  std::string jobs = "auto";  // concurrent cases: auto or a number (harness/runner/case_pool.h)
  std::string report, junit, baseline;
  std::string page;  // a folder for report.html, the run's report as a page
  std::string dump = "none";
  double growth = 2;  // --baseline: flag error growth past this ratio
  bool json = false;
  bool search = false;   // precision search for failing cases
  bool contract = true;  // check every group against the numerics contract (torch contract mode)
  std::string resume;    // an incomplete report: run the cases it did not, and complete it
  std::string mem;       // the memory budget of every case (RunOptions::memory_budget)
};

// The cases a run selects: --case lines, then the suite (ci when neither is given), with
// --model, --inject and --filter applied.
Expected<std::vector<Case>> selected_cases(const RunCommandOptions& options);
Expected<int> cases_list_command(const RunCommandOptions& options);

// `--mem SIZE` in bytes (0 when not given), or why SIZE is not a size.
Expected<int64_t> memory_budget_option(const std::string& text);

using Shard = ShardSpec;
// --shard K/N, else the scheduler's variables; {0, 1} when neither is given.
Expected<Shard> parse_shard(const std::string& flag);

// Returns the exit code: 0 every case passed (or was skipped), 1 a case failed or errored.
Expected<int> run_command(const RunCommandOptions& options, const std::string& command_line);

struct TriageOptions {
  std::string model_dir, pipeline, input;
  std::string activations;  // a dump of the user's stack (tools/dump_activations.py)
  std::string mem;          // the memory budget (RunOptions::memory_budget)
  FamilyFlags family;       // the pipeline's family options, as a case's (steps=, vae=, ...)
  std::string policy = "w=f16,a=f16,acc=f32";
  std::string keep_fp32, inject;
  std::string tiling = "off";
  std::string device = "cpu";
  std::string report;
  std::string page;  // a folder for report.html, the triage's report as a page
  std::string
      repro;  // "": beside --report (NAME-repro.safetensors), else out/twinpath-repro.safetensors
  bool json = false;
};
// Exit code 1 when the case fails (a NaN or a breach), 0 when it passes.
Expected<int> triage_command(const TriageOptions& options);
Expected<int> replay_command(const std::string& file, const std::string& device);

struct TradeoffCommandOptions {
  std::string model, pipeline;        // no pipeline: the family's (PipelineDescriptor)
  FamilyFlags family;                 // the pipeline's family options, as a case's
  std::vector<std::string> policies;  // --policy, repeatable; empty: every supported one
  std::string resolutions = "256x256";
  int repeats = 3;
  std::string device = "cpu";
  std::string out;  // folder for report.h5 and report.html
  std::string mem;  // --mem SIZE: each point's memory budget
};
Expected<int> tradeoff_command(const TradeoffCommandOptions& options,
                               const std::string& command_line);

struct SelftestOptions {
  std::string device = "cuda";
  std::string out = "out/selftest";  // selftest.h5, selftest.xml and summary.md
};
// `twinpath selftest --device cuda`: the built-in suite `selftest` on the CUDA kernels with the
// contract check; without a CUDA device, one sentence (exit 2).
Expected<int> selftest_command(const SelftestOptions& options, const std::string& command_line);

// A new report's header: tool version, commit, command line, host, device and UTC time.
RunReport report_header(const std::string& command_line, compiled::Device device);

// `model space [FAMILY]`: each family's space of drawn configs (the keys it varies and their
// ranges) and one draw's config.json; an unknown family gets the list.
Status model_space_command(const std::string& family);
Status model_init_command(const std::string& config, uint64_t seed, const std::string& out_dir,
                          const std::string& scale);
Status exec_command(const ExecOptions& options);
// `twinpath plan show --case LINE`: the case's plans and every group's numerics contract.
Expected<int> plan_show_command(const std::string& case_line, bool json);

}  // namespace tp
