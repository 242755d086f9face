// Subcommands of the twinpath binary. main() only parses flags; these do the work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/cli/paths.h"
#include "harness/status.h"

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
};

struct RunCommandOptions {
  std::vector<std::string> cases;  // --case, repeatable
  std::string suite;               // a file of case lines
  std::string filter;              // regex over case ids
  std::string model;               // replaces every case's model
  std::string device = "cpu";
  std::string inject;              // faults added to every case
  std::string shard;               // K/N; else GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS
  std::string report, junit, baseline;
  std::string dump = "none";
  double growth = 2;               // --baseline: flag error growth past this ratio
  bool json = false;
  bool search = false;             // precision search for failing cases
};

struct Shard {
  int index = 0, total = 1;
};
Expected<Shard> parse_shard(const std::string& flag);

// Returns the exit code: 0 every case passed (or was skipped), 1 a case failed or errored.
Expected<int> run_command(const RunCommandOptions& options, const std::string& command_line);

Status model_init_command(const std::string& config, uint64_t seed, const std::string& out_dir);
Status exec_command(const ExecOptions& options);

}  // namespace tp
