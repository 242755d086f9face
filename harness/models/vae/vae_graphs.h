// A VAE's graphs from its config (each architecture builds its own: VaeConfig).
//   encoder graph: input "sample" [B,C,H,W] (in [-1,1]) -> VaeConfig::encoder_outputs()
//   decoder graph: input "latents" [B,L,h,w] -> "sample" [B,C,H,W]
#pragma once

#include <vector>

#include "harness/core/graph.h"
#include "harness/models/vae/vae_config.h"

namespace tp {

Graph build_encoder_graph(const VaeConfig& config);
Graph build_decoder_graph(const VaeConfig& config);
// The encoder and decoder graphs (what a plan file may hold plans for).
std::vector<Graph> model_graphs(const VaeConfig& config);
// Every parameter the model's checkpoint must hold (encoder and decoder), in graph order.
std::vector<ParamSpec> model_param_specs(const VaeConfig& config);

}  // namespace tp
