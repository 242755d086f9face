#include "harness/models/model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "harness/core/atomic_file.h"
#include "harness/core/format.h"
#include "harness/core/memory.h"
#include "harness/core/numbers.h"
#include "harness/core/rng.h"
#include "harness/core/untrusted_json.h"

namespace tp {
namespace fs = std::filesystem;

Expected<Model> load_model(const std::string& dir) {
  if (!fs::is_directory(dir))
    return Error(dir +
                 ": no such model folder; pass a diffusers model folder (config.json + "
                 "diffusion_pytorch_model.safetensors), or make one with `twinpath model init`");
  Model m;
  m.dir = dir;
  TP_ASSIGN_OR_RETURN(m.config, load_model_config((fs::path(dir) / "config.json").string()));
  // One file, else a sharded checkpoint's index (diffusers' names, the fp16 variant second).
  const std::vector<ParamSpec> specs = m.family().param_specs(*m.config);
  for (const char* variant : {"", ".fp16"}) {
    const fs::path single =
        fs::path(dir) / ("diffusion_pytorch_model" + std::string(variant) + ".safetensors");
    if (fs::exists(single)) {
      TP_ASSIGN_OR_RETURN(m.weights, load_checkpoint(single.string(), specs));
      return m;
    }
    const fs::path index = single.string() + ".index.json";
    if (fs::exists(index)) {
      TP_ASSIGN_OR_RETURN(m.weights, load_sharded_checkpoint(index.string(), specs));
      return m;
    }
  }
  const std::string hint = fs::exists(fs::path(dir) / "diffusion_pytorch_model.bin")
                               ? "; only a pickle .bin is there: convert it to safetensors first"
                               : "";
  return Error((fs::path(dir) / "diffusion_pytorch_model.safetensors").string() +
               ": missing model weights (nor is there a sharded checkpoint's "
               "diffusion_pytorch_model.safetensors.index.json)" +
               hint);
}

namespace {

Tensor random_param(const ParamSpec& spec, const std::vector<ParamSpec>& all, uint64_t seed) {
  Tensor t(DType::kF32, spec.shape);
  float* p = t.data<float>();
  Rng rng(seed, spec.key);
  const bool is_norm = spec.key.find("norm") != std::string::npos;
  double lo, hi;
  if (is_norm) {
    const bool gamma =
        spec.key.size() > 7 && spec.key.compare(spec.key.size() - 7, 7, ".weight") == 0;
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

// The config.json of a built-in name or a file, parsed.
Expected<std::pair<nlohmann::json, std::shared_ptr<const ModelConfig>>> read_config(
    const std::string& config_name_or_path) {
  std::string text;
  std::error_code ec;  // a name past the system's limit is no file: then no built-in either
  if (fs::exists(config_name_or_path, ec) && !fs::is_directory(config_name_or_path, ec)) {
    std::ifstream in(config_name_or_path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    TP_ASSIGN_OR_RETURN(text, builtin_config_text(config_name_or_path));
  }
  JsonReadOptions options;
  options.comments = true;
  TP_ASSIGN_OR_RETURN(nlohmann::json j,
                      parse_untrusted_json(text, excerpt(config_name_or_path, 200), options));
  TP_ASSIGN_OR_RETURN(auto config, parse_model_config(j, config_name_or_path));
  j["_class_name"] = config->family().class_name();
  return std::make_pair(std::move(j), std::move(config));
}

}  // namespace

Expected<Model> seeded_model(const std::string& name, std::shared_ptr<const ModelConfig> config,
                             uint64_t seed) {
  Model m;
  m.dir = name;
  m.config = std::move(config);
  const std::vector<ParamSpec> specs = m.family().param_specs(*m.config);
  // The weights are made in fp32 (and written from there): refuse a config whose weights cannot
  // fit before allocating them.
  double bytes = 0;
  for (const ParamSpec& s : specs) bytes += 4.0 * double(shape_numel(s.shape));
  const int64_t available = available_memory_bytes();
  if (available > 0 && bytes > double(available))
    return Error(
        name + ": the config's " + std::to_string(specs.size()) + " weights need " +
        format_bytes(int64_t(std::min(bytes, 9e18))) + " in fp32, more than the " +
        format_bytes(available) +
        " of memory available; check its channel counts, or use a machine with more memory");
  // Each weight has its own stream (seed, key): made in parallel, the same values on any thread
  // count (SDXL's 2.6 billion took most of a GPU benchmark's set-up on one thread).
  std::vector<Tensor> made(specs.size());
#pragma omp parallel for schedule(dynamic)
  for (std::size_t i = 0; i < specs.size(); ++i) made[i] = random_param(specs[i], specs, seed);
  for (std::size_t i = 0; i < specs.size(); ++i)
    m.weights.emplace(specs[i].key, std::move(made[i]));
  return m;
}

Expected<Model> make_model(const std::string& config_name_or_path, uint64_t seed) {
  TP_ASSIGN_OR_RETURN(auto parsed, read_config(config_name_or_path));
  return seeded_model(config_name_or_path, std::move(parsed.second), seed);
}

namespace {

// For the error naming a layer without weights: the layers with weights below `layer` (it may
// name their module: HunyuanVideo's `conv1` holds its Conv3d as `conv1.conv`), else the model's
// first layer with weights.
std::string layers_to_name(const Weights& weights, const std::string& layer) {
  const std::string suffix = ".weight";
  std::vector<std::string> below;
  std::string first;
  for (const auto& entry : weights) {
    const std::string& key = entry.first;
    if (key.size() <= suffix.size() ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string name = key.substr(0, key.size() - suffix.size());
    if (first.empty()) first = name;
    if (name.rfind(layer + ".", 0) == 0 && below.size() < 3) below.push_back(name);
  }
  if (below.empty()) return "name it by its diffusers path, e.g. " + first;
  std::string list;
  for (const std::string& name : below) list += (list.empty() ? "" : ", ") + name;
  return "the layers with weights below it: " + list;
}

}  // namespace

Status scale_layer(Model& model, const std::string& layer, double factor) {
  bool found = false;
  for (const char* suffix : {".weight", ".bias"}) {
    auto it = model.weights.find(layer + suffix);
    if (it == model.weights.end()) continue;
    found = true;
    Tensor f = it->second.to(DType::kF32);
    for (int64_t i = 0; i < f.numel(); ++i) f.data<float>()[i] = float(f.data<float>()[i] * factor);
    it->second = f.to(it->second.dtype());
  }
  if (!found)
    return Error("the model has no layer '" + layer + "' with weights; " +
                 layers_to_name(model.weights, layer));
  return Status();
}

void make_weights_tie_prone(Model& model) {
  for (auto& [key, t] : model.weights) {
    if (t.rank() < 2) continue;  // biases and norm affines are not stored in fp8
    Tensor f = t.to(DType::kF64);
    double* w = f.data<double>();
    const int64_t rows = t.dim(0), per_row = t.numel() / rows;
    for (int64_t r = 0; r < rows; ++r) {
      double amax = 0;
      for (int64_t i = 0; i < per_row; ++i) amax = std::max(amax, std::fabs(w[r * per_row + i]));
      if (amax == 0) continue;
      // Scale the row so its largest |w| is 1.75 * 2^m (fp8's largest finite over a power of two),
      // then keep 5 significant bits: w / scale needs 5 bits where e4m3 holds 4.
      int e = 0;
      std::frexp(amax / 1.75, &e);
      const double factor = std::ldexp(1.75, e - 1) / amax;
      for (int64_t i = 0; i < per_row; ++i) {
        double& v = w[r * per_row + i];
        int ve = 0;
        std::frexp(v * factor, &ve);
        v = v == 0 ? 0 : std::ldexp(std::nearbyint(std::ldexp(v * factor, 5 - ve)), ve - 5);
      }
    }
    t = f.to(t.dtype());
  }
}

void scale_weight_matrices(Model& model, double factor) {
  for (auto& [key, t] : model.weights) {
    if (t.rank() < 2) continue;
    Tensor f = t.to(DType::kF64);
    for (int64_t i = 0; i < f.numel(); ++i) f.data<double>()[i] *= factor;
    t = f.to(t.dtype());
  }
}

Status init_model(const std::string& config_name_or_path, uint64_t seed, const std::string& out_dir,
                  const std::string& scale) {
  TP_ASSIGN_OR_RETURN(auto parsed, read_config(config_name_or_path));
  TP_ASSIGN_OR_RETURN(Model m, seeded_model(config_name_or_path, parsed.second, seed));
  if (!scale.empty()) {
    const std::size_t star = scale.rfind('*');
    const std::optional<double> factor =
        star == std::string::npos ? std::nullopt
                                  : parse_number<double>(std::string_view(scale).substr(star + 1));
    if (star == 0 || !factor)
      return Error("--scale-layer '" + excerpt(scale) +
                   "' is not LAYER*FACTOR, e.g. decoder.up_blocks.0.resnets.0.conv1*1e5");
    TP_RETURN_IF_ERROR(scale_layer(m, scale.substr(0, star), *factor));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Error("cannot create " + out_dir + ": " + ec.message());
  NamedTensors tensors;
  for (const ParamSpec& s : m.family().param_specs(*m.config))
    tensors.emplace_back(s.key, m.weights.at(s.key));
  TP_RETURN_IF_ERROR(
      write_safetensors((fs::path(out_dir) / "diffusion_pytorch_model.safetensors").string(),
                        tensors, {{"format", "pt"}, {"twinpath_seed", std::to_string(seed)}}));
  return write_file_atomically((fs::path(out_dir) / "config.json").string(),
                               [&](std::ostream& out) {
                                 out << json_text(parsed.first, 2) << "\n";
                                 return Status();
                               });
}

}  // namespace tp
