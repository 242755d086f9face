#include "harness/model.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/atomic_file.h"
#include "harness/rng.h"
#include "harness/vae_graphs.h"

namespace tp {
namespace fs = std::filesystem;

Expected<Model> load_model(const std::string& dir) {
  if (!fs::is_directory(dir))
    return Error(dir + ": no such model folder; pass a diffusers model folder (config.json + "
                 "diffusion_pytorch_model.safetensors), or make one with `twinpath model init`");
  Model m;
  m.dir = dir;
  TP_ASSIGN_OR_RETURN(m.config, load_vae_config((fs::path(dir) / "config.json").string()));
  fs::path weights = fs::path(dir) / "diffusion_pytorch_model.safetensors";
  if (!fs::exists(weights) && fs::exists(fs::path(dir) / "diffusion_pytorch_model.fp16.safetensors"))
    weights = fs::path(dir) / "diffusion_pytorch_model.fp16.safetensors";
  if (!fs::exists(weights)) {
    std::string hint = fs::exists(fs::path(dir) / "diffusion_pytorch_model.bin")
                           ? "; only a pickle .bin is there: convert it to safetensors first"
                           : "";
    return Error(weights.string() + ": missing model weights" + hint);
  }
  TP_ASSIGN_OR_RETURN(m.weights, load_checkpoint(weights.string(), model_param_specs(m.config)));
  return m;
}

namespace {

Tensor random_param(const ParamSpec& spec, const std::vector<ParamSpec>& all, uint64_t seed) {
  Tensor t(DType::kF32, spec.shape);
  float* p = t.data<float>();
  Rng rng(seed, spec.key);
  const bool is_norm = spec.key.find("norm") != std::string::npos;
  double lo, hi;
  if (is_norm) {
    const bool gamma = spec.key.size() > 7 && spec.key.compare(spec.key.size() - 7, 7, ".weight") == 0;
    lo = gamma ? 0.9 : -0.1;
    hi = gamma ? 1.1 : 0.1;
  } else {
    // fan_in of the layer: the weight's elements per output channel (for a bias, its weight's).
    std::string weight_key = spec.key;
    if (spec.shape.size() == 1) weight_key = spec.key.substr(0, spec.key.size() - 4) + "weight";
    int64_t fan_in = 1;
    for (const ParamSpec& s : all)
      if (s.key == weight_key) fan_in = shape_numel(s.shape) / s.shape[0];
    hi = 1.0 / std::sqrt(double(fan_in));
    lo = -hi;
  }
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(rng.uniform(lo, hi));
  return t;
}

}  // namespace

Status init_model(const std::string& config_name_or_path, uint64_t seed, const std::string& out_dir) {
  std::string text;
  if (fs::exists(config_name_or_path) && !fs::is_directory(config_name_or_path)) {
    std::ifstream in(config_name_or_path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    TP_ASSIGN_OR_RETURN(text, builtin_config_text(config_name_or_path));
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false, true);
  if (j.is_discarded()) return Error(config_name_or_path + ": not valid JSON");
  TP_ASSIGN_OR_RETURN(VaeConfig config, parse_vae_config(j, config_name_or_path));
  j["_class_name"] = config.class_name();

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Error("cannot create " + out_dir + ": " + ec.message());
  const std::vector<ParamSpec> specs = model_param_specs(config);
  NamedTensors tensors;
  for (const ParamSpec& s : specs) tensors.emplace_back(s.key, random_param(s, specs, seed));
  TP_RETURN_IF_ERROR(write_safetensors((fs::path(out_dir) / "diffusion_pytorch_model.safetensors").string(),
                                       tensors, {{"format", "pt"}, {"twinpath_seed", std::to_string(seed)}}));
  return write_file_atomically((fs::path(out_dir) / "config.json").string(), [&](std::ostream& out) {
    out << j.dump(2) << "\n";
    return Status();
  });
}

}  // namespace tp
