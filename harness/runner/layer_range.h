// How large one layer's output gets on the reference: what `model init --scale-layer` prints, so
// a user picks a factor that overflows the dtype they mean to test.
#pragma once

#include <string>

#include "harness/models/model.h"

namespace tp {

struct LayerRange {
  std::string pipeline;  // the first of the family's pipelines that runs the layer
  int64_t height = 64, width = 64;
  double max_abs = 0;  // the largest finite |x| of the layer's output (its ops', for a module)
};

// Runs the family's pipelines on seeded inputs at 64x64 on the fp32 reference until one runs
// `layer` (an op's or a module's diffusers path); an error when none does.
Expected<LayerRange> layer_output_range(const Model& model, const std::string& layer);

// The sentence `model init --scale-layer LAYER*FACTOR` prints for a model written with it.
std::string scaled_layer_advice(const std::string& layer, double factor, const LayerRange& range);

}  // namespace tp
