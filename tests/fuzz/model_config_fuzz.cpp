// Fuzz target: config.json for every model family (AutoencoderKL, AutoencoderTiny,
// UNet2DConditionModel): the family is chosen by _class_name as on load, the config parsed with
// diffusers' defaults, and, once accepted, its graphs and parameter list built.
#include <nlohmann/json.hpp>

#include "harness/models/family.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  auto family = tp::family_of_config(j, "config.json");
  if (!family.ok()) return 0;
  auto config = tp::parse_model_config(j, "config.json");
  if (!config.ok()) return 0;
  (void)(*family)->graphs(**config);
  (void)(*family)->param_specs(**config);
  return 0;
}
