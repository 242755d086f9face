#include "cases/tiling_points.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/models/vae/tiling.h"
#include "harness/models/vae/vae_config.h"

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
  TP_ASSIGN_OR_RETURN(std::shared_ptr<const ModelConfig> model, case_config(c.model));
  const auto* config = dynamic_cast<const VaeConfig*>(model.get());
  if (!config) return Error("res=tiling: " + model->family().class_name() + " has no tiling rule");
  TP_ASSIGN_OR_RETURN(TileGeometry g,
                      tile_geometry(*config, TilingOptions{true, c.tile_min, c.tile_stride}));
  const int64_t q = config->downscale();                // one latent pixel, in image pixels
  std::vector<std::pair<int64_t, int64_t>> thresholds;  // (threshold, stride) in pixels, per stage
  if (c.pipeline != "vae.decode") thresholds.emplace_back(g.sample_min, g.encode_stride);
  if (c.pipeline != "vae.encode") thresholds.emplace_back(g.latent_min * q, g.decode_stride * q);
  std::set<std::pair<int64_t, int64_t>> out;
  for (const auto& [t, s] : thresholds) {
    for (int64_t p : {t - q, t, t + q, s, s + q, 2 * s, 2 * s + q}) {
      p = p / q * q;  // whole latent pixels
      if (p < q) continue;
      out.emplace(p, t);
      out.emplace(t, p);
    }
  }
  return std::vector<std::pair<int64_t, int64_t>>(out.begin(), out.end());
}

}  // namespace tp
