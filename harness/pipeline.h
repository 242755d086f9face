// Pipelines: what a user runs (vae.encode, vae.decode, vae.roundtrip) over any path that can
// execute a graph. Latents are the VAE's own (unscaled): scaling_factor/shift_factor belong to
// the diffusion pipeline around the VAE and are not applied here.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "harness/model.h"
#include "harness/safetensors.h"

namespace tp {

enum class Pipeline { kEncode, kDecode, kRoundtrip };

Expected<Pipeline> parse_pipeline(std::string_view name);
const char* pipeline_name(Pipeline p);

// A path: executes one graph with the model's weights on named inputs.
using GraphRunner =
    std::function<Expected<NamedTensors>(const Graph& graph, const Weights& weights, const NamedTensors& inputs)>;

// Picks the pipeline's input among a file's tensors: the only tensor, or by name
// (encode: "sample"/"image"; decode: "latents"/"latent"/"z", else "mean" = posterior mode).
Expected<Tensor> select_pipeline_input(Pipeline p, const NamedTensors& tensors, const std::string& source);

// Checks an input's shape against the model and pipeline; the error says what shape it takes.
Status check_pipeline_input(const Model& model, Pipeline p, const Tensor& input);

// Checks the input's shape against the model, then runs. Outputs: encode -> KL: "mean",
// "logvar"; Tiny: "latents". decode -> "sample". roundtrip -> "sample" (decoded from the
// posterior mode for KL; from the raw latents for Tiny, without diffusers' uint8
// quantization in AutoencoderTiny.forward, which would make comparisons flip on rounding).
Expected<NamedTensors> run_pipeline(const Model& model, Pipeline p, const Tensor& input, const GraphRunner& run);

}  // namespace tp
