#include "cases/tiling_points.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace tp {
namespace {

// The case's model config: a built-in name (an @SEED suffix changes only the weights) or a folder.
Expected<std::shared_ptr<const ModelConfig>> case_config(const std::string& model) {
  const std::string name = model.substr(0, model.rfind('@'));
  const std::vector<std::string> names = builtin_config_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) {
    TP_ASSIGN_OR_RETURN(std::string text, builtin_config_text(name));
    return parse_model_config(nlohmann::json::parse(text), name);
  }
  return load_model_config((std::filesystem::path(model) / "config.json").string());
}

}  // namespace

Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(const Case& c) {
  TP_ASSIGN_OR_RETURN(std::shared_ptr<const ModelConfig> config, case_config(c.model));
  const Family& family = config->family();
  const PipelineDescriptor* d = family.pipeline(c.pipeline);
  if (!d || !d->tiles)
    return Error("res=tiling: " + family.class_name() + " does not tile " + c.pipeline);
  return family.tiling_points(*config, c.pipeline, TilingOptions{true, c.tile_min, c.tile_stride});
}

}  // namespace tp
