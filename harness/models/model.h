// Models of any family: loaded from a diffusers-layout folder (config.json +
// diffusion_pytorch_model.safetensors) or made from a config with seeded weights.
#pragma once

#include <string>

#include "harness/core/checkpoint.h"
#include "harness/models/family.h"

namespace tp {

// Loads config.json (its family found by the registry) and the weights
// (diffusion_pytorch_model.safetensors, or the .fp16 variant when only that is present), checked
// against the config.
Expected<Model> load_model(const std::string& dir);

// Multiplies one layer's weight and bias (diffusers path, e.g. decoder.up_blocks.0.resnets.0.conv1)
// by `factor`: the SDXL-VAE f16 overflow on demand, or 0 for a constant output.
Status scale_layer(Model& model, const std::string& layer, double factor);

// Every conv and linear weight matrix (rank >= 2) made to meet exact ties under fp8 quantization:
// each output channel scaled so its largest |w| is 1.75 * 2^m (the fp8 scale max|w| / 448 or
// / 57344 is then a power of two) and every weight rounded to 5 significant bits, one more than
// e4m3 keeps (the case option weights=ties).
void make_weights_tie_prone(Model& model);

// Every conv and linear weight matrix (rank >= 2) times `factor`; biases and norm affines kept
// (the case option weights=*K, which a drawn config's input search tries).
void scale_weight_matrices(Model& model, double factor);

// Models with seeded random weights, for a built-in config name or a config.json path.
// Conv/linear weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch's default init);
// GroupNorm weight ~ 1 + U(-0.1, 0.1), bias ~ U(-0.1, 0.1). Each tensor's values depend only on
// (seed, key).
// In memory (m.dir holds the config name), without writing files.
Expected<Model> make_model(const std::string& config_name_or_path, uint64_t seed);
// Of a config already parsed (parse_model_config); `name` goes to m.dir and into errors.
Expected<Model> seeded_model(const std::string& name, std::shared_ptr<const ModelConfig> config,
                             uint64_t seed);
// Written as a model folder; `scale` (optional, "LAYER*FACTOR") applies scale_layer first.
Status init_model(const std::string& config_name_or_path, uint64_t seed, const std::string& out_dir,
                  const std::string& scale = "");

}  // namespace tp
