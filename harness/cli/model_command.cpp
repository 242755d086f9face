#include <chrono>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/models/model.h"

namespace tp {

Status model_init_command(const std::string& config, uint64_t seed, const std::string& out_dir,
                          const std::string& scale) {
  const auto start = std::chrono::steady_clock::now();
  TP_RETURN_IF_ERROR(init_model(config, seed, out_dir, scale));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "wrote " << out_dir << " (config " << config << ", seed " << seed
            << (scale.empty() ? "" : ", scaled " + scale) << ") in " << seconds << " s\n";
  return Status();
}

}  // namespace tp
