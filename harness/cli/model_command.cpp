#include <chrono>
#include <cstdlib>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/core/numbers.h"
#include "harness/models/model.h"
#include "harness/runner/layer_range.h"

namespace tp {

Status model_init_command(const std::string& config, uint64_t seed, const std::string& out_dir,
                          const std::string& scale) {
  const auto start = std::chrono::steady_clock::now();
  TP_RETURN_IF_ERROR(init_model(config, seed, out_dir, scale));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "wrote " << out_dir << " (config " << config << ", seed " << seed
            << (scale.empty() ? "" : ", scaled " + scale) << ") in " << seconds << " s\n";
  if (scale.empty()) return Status();
  // What the factor does to the layer's output, so the user sees which dtype it overflows.
  const std::size_t star = scale.rfind('*');
  const std::string layer = scale.substr(0, star);
  TP_ASSIGN_OR_RETURN(const Model model, load_model(out_dir));
  TP_ASSIGN_OR_RETURN(const LayerRange range, layer_output_range(model, layer));
  const double factor = parse_number<double>(std::string_view(scale).substr(star + 1)).value_or(1);
  std::cout << scaled_layer_advice(layer, factor, range) << "\n";
  return Status();
}

}  // namespace tp
