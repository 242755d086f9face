// Subcommands of the twinpath binary. main() only parses flags; these do the work.
#pragma once

#include <cstdint>
#include <string>

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

Status model_init_command(const std::string& config, uint64_t seed, const std::string& out_dir);
Status exec_command(const ExecOptions& options);

}  // namespace tp
