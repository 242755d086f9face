// Model builders: the graphs of diffusers' AutoencoderKL and AutoencoderTiny for a config.
//   encoder graph: input "sample" [B,3,H,W] (in [-1,1]) -> KL: "mean", "logvar" (clamped to
//                  [-30, 20], as DiagonalGaussianDistribution); Tiny: "latents"
//   decoder graph: input "latents" [B,L,h,w] -> "sample" [B,3,H,W]
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

// Per architecture (kl_graph.cpp, tiny_graph.cpp).
Graph build_kl_encoder_graph(const KlConfig& config);
// The KL encoder up to the 2L-channel moments (quant_conv's output), before the posterior's
// chunk and clamp: what tiled encode blends.
Graph build_kl_moments_graph(const KlConfig& config);
Graph build_kl_decoder_graph(const KlConfig& config);
Graph build_tiny_encoder_graph(const TinyConfig& config);
Graph build_tiny_decoder_graph(const TinyConfig& config);

}  // namespace tp
