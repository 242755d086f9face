#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "harness/cli/commands.h"
#include "harness/core/format.h"
#include "harness/core/names.h"
#include "harness/core/numbers.h"
#include "harness/models/config_space.h"
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

Status model_space_command(const std::string& family) {
  const std::vector<std::string> names = config_space_names();
  if (!family.empty() && std::find(names.begin(), names.end(), family) == names.end())
    return Error("no family named '" + excerpt(family) + "' has a config space; use one of " +
                 comma_list(names) + did_you_mean(family, names));
  for (const Family* f : families()) {
    const ConfigSpace* space = f->config_space();
    if (!space || (!family.empty() && space->family != family)) continue;
    std::cout << space->family << " (" << f->class_name() << "): model=random:" << space->family
              << ":SEED, or model init --random " << space->family << ":SEED\n";
    for (const ConfigKey& k : space->keys) std::cout << "  " << k.key << ": " << k.range << "\n";
    if (family.empty()) continue;
    TP_ASSIGN_OR_RETURN(std::string text,
                        builtin_config_text(kRandomConfigPrefix + space->family + ":1"));
    std::cout << "draw 1:\n" << text << "\n";
  }
  return Status();
}

}  // namespace tp
