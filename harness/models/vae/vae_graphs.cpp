// The VAE's graphs for either architecture (AutoencoderKL: kl_graph.cpp, AutoencoderTiny:
// tiny_graph.cpp).
#include "harness/models/vae/vae_graphs.h"

namespace tp {

Graph build_encoder_graph(const VaeConfig& config) {
  return config.kind == VaeConfig::Kind::kKl ? build_kl_encoder_graph(config.kl)
                                             : build_tiny_encoder_graph(config.tiny);
}

Graph build_decoder_graph(const VaeConfig& config) {
  Graph g = config.kind == VaeConfig::Kind::kKl ? build_kl_decoder_graph(config.kl)
                                                : build_tiny_decoder_graph(config.tiny);
  g.input_pixel = config.downscale();
  return g;
}

std::vector<Graph> model_graphs(const VaeConfig& config) {
  return {build_encoder_graph(config), build_decoder_graph(config)};
}

std::vector<ParamSpec> model_param_specs(const VaeConfig& config) {
  std::vector<ParamSpec> specs = build_encoder_graph(config).params;
  for (ParamSpec& p : build_decoder_graph(config).params) specs.push_back(std::move(p));
  return specs;
}

}  // namespace tp
