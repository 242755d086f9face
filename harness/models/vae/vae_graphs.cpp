#include "harness/models/vae/vae_graphs.h"

namespace tp {

Graph build_encoder_graph(const VaeConfig& config) { return config.encoder_graph(); }

Graph build_decoder_graph(const VaeConfig& config) {
  Graph g = config.decoder_graph();
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
