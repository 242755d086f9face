#include "harness/models/vae/pipeline.h"

#include "harness/core/format.h"
#include "harness/models/vae/streamed_tiling.h"
#include "harness/models/vae/tiling.h"
#include "harness/models/vae/vae_graphs.h"

namespace tp {

Expected<Pipeline> parse_pipeline(std::string_view name) {
  if (name == "vae.encode") return Pipeline::kEncode;
  if (name == "vae.decode") return Pipeline::kDecode;
  if (name == "vae.roundtrip") return Pipeline::kRoundtrip;
  return Error("unknown pipeline '" + std::string(name) +
               "'; use vae.encode, vae.decode or vae.roundtrip");
}

const char* pipeline_name(Pipeline p) {
  switch (p) {
    case Pipeline::kEncode:
      return "vae.encode";
    case Pipeline::kDecode:
      return "vae.decode";
    case Pipeline::kRoundtrip:
      return "vae.roundtrip";
  }
  return "?";
}

Expected<Tensor> select_pipeline_input(Pipeline p, const NamedTensors& tensors,
                                       const std::string& source) {
  if (tensors.size() == 1) return tensors[0].second;
  const std::vector<std::string> names =
      p == Pipeline::kDecode ? std::vector<std::string>{"latents", "latent", "z", "mean"}
                             : std::vector<std::string>{"sample", "image"};
  for (const std::string& want : names)
    if (const Tensor* t = find_tensor(tensors, want)) return *t;
  std::string have;
  for (const auto& [name, t] : tensors) have += (have.empty() ? "" : ", ") + name;
  std::string wanted;
  for (const auto& n : names) wanted += (wanted.empty() ? "" : ", ") + n;
  return Error(source + ": holds " + std::to_string(tensors.size()) + " tensors (" + have +
               ") and none is named " + wanted + "; keep one tensor in the file or name it so");
}

Status check_pipeline_input(const Model& m, Pipeline p, const Tensor& input) {
  const bool latent = p == Pipeline::kDecode;
  const int channels = latent ? vae_config(m).latent_channels() : vae_config(m).image_channels();
  const std::string what = latent ? "latent" : "image";
  if (input.rank() != 4 || input.dim(1) != channels)
    return Error(std::string(pipeline_name(p)) + " takes " + with_article(what) +
                 " of shape [batch, " + std::to_string(channels) +
                 ", height, width] for this model, but the input is " +
                 shape_string(input.shape()));
  if (input.numel() == 0)
    return Error(std::string(pipeline_name(p)) + ": the input is empty " +
                 shape_string(input.shape()));
  return Status();
}

Expected<NamedTensors> run_pipeline(const Model& model, Pipeline p, const Tensor& input,
                                    GraphExecutor& executor, const TilingOptions& tiling,
                                    bool encoder_outputs) {
  if (tiling.enabled)
    return executor.streams_tiles() ? run_streamed_tiled(model, p, input, executor, tiling)
                                    : run_plain_tiled(model, p, input, executor, tiling);
  TP_RETURN_IF_ERROR(check_pipeline_input(model, p, input));
  if (p == Pipeline::kDecode)
    return executor.run(build_decoder_graph(vae_config(model)), model.weights,
                        {{"latents", input}});
  const Graph encoder = build_encoder_graph(vae_config(model));
  if (p == Pipeline::kEncode) return executor.run(encoder, model.weights, {{"sample", input}});
  const std::string latents = model.family().pipeline("vae.roundtrip")->handoff->output;
  TP_ASSIGN_OR_RETURN(NamedTensors both,
                      executor.run_chained(encoder, build_decoder_graph(vae_config(model)),
                                           model.weights, {{"sample", input}}, latents));
  if (!encoder_outputs)
    return NamedTensors{both[0]};  // the decoded sample; the encoder's outputs follow it
  for (std::size_t i = 1; i < both.size(); ++i) both[i].first = "encoder." + both[i].first;
  return both;
}

Expected<NamedTensors> run_pipeline(const Model& model, Pipeline p, const Tensor& input,
                                    const GraphRunner& run, const TilingOptions& tiling) {
  FunctionExecutor executor(run);
  return run_pipeline(model, p, input, executor, tiling);
}

}  // namespace tp
