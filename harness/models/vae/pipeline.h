// Pipelines: what a user runs (vae.encode, vae.decode, vae.roundtrip) over any path that can
// execute a graph. Latents are the VAE's own (unscaled): scaling_factor/shift_factor belong to
// the diffusion pipeline around the VAE and are not applied here.
#pragma once

#include <string>
#include <string_view>

#include "harness/core/executor.h"
#include "harness/core/safetensors.h"
#include "harness/models/model.h"
#include "harness/models/vae/vae_config.h"

namespace tp {

enum class Pipeline { kEncode, kDecode, kRoundtrip };

Expected<Pipeline> parse_pipeline(std::string_view name);
const char* pipeline_name(Pipeline p);

// Tiling (TilingOptions, family.h): zero sizes mean diffusers' defaults: AutoencoderKL min = the
// config's sample_size and overlap factor 0.25; AutoencoderTiny min 512 and overlap factor 0.125.

// Picks the pipeline's input among a file's tensors: the only tensor, or by name
// (encode: "sample"/"image"; decode: "latents"/"latent"/"z", else "mean" = posterior mode).
Expected<Tensor> select_pipeline_input(Pipeline p, const NamedTensors& tensors,
                                       const std::string& source);

// Checks an input's shape against the model and pipeline; the error says what shape it takes.
Status check_pipeline_input(const Model& model, Pipeline p, const Tensor& input);

// Checks the input's shape against the model, then runs on `executor`. Outputs: encode -> KL:
// "mean", "logvar"; Tiny: "latents". decode -> "sample". roundtrip -> "sample" (decoded from
// the posterior mode for KL; from the raw latents for Tiny, without diffusers' uint8
// quantization in AutoencoderTiny.forward, which would make comparisons flip on rounding).
// A roundtrip runs encoder and decoder chained (co-resident on the compiled path). With
// `encoder_outputs`, an untiled roundtrip also returns the encoder's outputs (read after the
// decoder ran, as a caller holding them would: field report 1), named "encoder.<name>".
// With tiling enabled, the executor's tiler runs it (streamed or plain, tiling.h).
Expected<NamedTensors> run_pipeline(const Model& model, Pipeline p, const Tensor& input,
                                    GraphExecutor& executor, const TilingOptions& tiling = {},
                                    bool encoder_outputs = false);
// The same on a path given as a function.
Expected<NamedTensors> run_pipeline(const Model& model, Pipeline p, const Tensor& input,
                                    const GraphRunner& run, const TilingOptions& tiling = {});

}  // namespace tp
