// A model family: one kind of diffusers model (AutoencoderKL, AutoencoderTiny, ...), and all
// twinpath needs to load, build and run it. Each family lives in its own folder under
// harness/models/ and is listed once in registry.cpp (or registered at run time with
// register_family, as a test's toy family is); `model init`, `exec`, `run`, `cases list`,
// `triage` and `tradeoff` find it through the registry.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/executor.h"
#include "harness/core/graph.h"

namespace tp {

class Family;

// A family's config.json, parsed with diffusers' defaults for the fields the file omits.
class ModelConfig {
 public:
  virtual ~ModelConfig() = default;
  virtual const Family& family() const = 0;
  // A VAE's scaling_factor (a pipeline divides the denoised latents by it before decoding);
  // none for other models.
  virtual std::optional<double> scaling_factor() const { return std::nullopt; }
};

// A model: a diffusers-layout folder (config.json + diffusion_pytorch_model.safetensors), or a
// built-in config with seeded weights (dir then holds the config's name).
struct Model {
  std::string dir;
  std::shared_ptr<const ModelConfig> config;
  Weights weights;
  const Family& family() const { return config->family(); }
};

// Tiled execution (families with a tiling rule): sizes in image pixels; zero means the family's
// default. A stride expresses video-VAE style (min, stride) pairs: the blend is min - stride.
struct TilingOptions {
  bool enabled = false;
  int64_t sample_min = 0;
  int64_t sample_stride = 0;
};

struct PipelineOptions {
  TilingOptions tiling;
  // A chained pipeline (see Handoff) also returns the first graph's outputs, "<graph>.<name>",
  // read after the second graph ran.
  bool stage_outputs = false;
  // Denoising pipelines: scheduler steps, and classifier-free guidance (off at <= 1, as
  // diffusers). SDXL's defaults.
  int steps = 50;
  double guidance_scale = 5.0;
  // Text-to-image pipelines: the VAE that decodes the denoised latents (not owned).
  const Model* vae = nullptr;
  // Base + refiner: the refiner UNet (not owned), and where the schedule is split between them
  // (the base's denoising_end, the refiner's denoising_start; diffusers' example's 0.8).
  const Model* refiner = nullptr;
  double denoising_split = 0.8;
};

// The part of a base + refiner run the refiner's calls belong to (GraphExecutor::set_part).
inline constexpr const char* kRefinerPart = "refiner/";

// A graph a pipeline runs, with the input shape it runs at; or, when `from` names an output,
// on the previous stage's output of that name.
struct Stage {
  Graph graph;
  Shape input;
  std::string from;
};

// A pipeline that runs two graphs chained: `second` reads `first`'s output `output`. Each graph
// alone is a pipeline of its own (`first_pipeline`, `second_pipeline`): a roundtrip is an encode
// then a decode.
struct Handoff {
  std::string first, output, second;  // graph names and the output that joins them
  std::string prefix;                 // what stage_outputs put before the first graph's outputs
  std::string first_pipeline, second_pipeline;
};

// How a case's input is made: seeded values ("normal", sigma) or a real-image-like input.
struct InputRequest {
  std::string pipeline;
  int64_t height = 0, width = 0;  // the case's res=, in image pixels
  uint64_t seed = 0;
  bool image = false;  // input=image
  double sigma = 1;    // input=normal*SIGMA
};

class Family {
 public:
  virtual ~Family() = default;

  // diffusers' class name (config.json's _class_name).
  virtual std::string class_name() const = 0;
  // Whether a config.json belongs to this family (by default: its _class_name).
  virtual bool claims(const nlohmann::json& config) const;
  // `source` names the file in error messages.
  virtual Expected<std::shared_ptr<const ModelConfig>> parse_config(
      const nlohmann::json& config, const std::string& source) const = 0;

  // Built-in configs (small ones for CI, real ones' configs): names and config.json text.
  virtual std::vector<std::string> builtin_names() const = 0;
  virtual std::string builtin_text(const std::string& name) const = 0;

  // Every graph the family builds for a config (what a plan file may hold plans for), and every
  // parameter the checkpoint must hold, in graph order.
  virtual std::vector<Graph> graphs(const ModelConfig& config) const = 0;
  virtual std::vector<ParamSpec> param_specs(const ModelConfig& config) const;

  // Pipeline names ("vae.decode", ...), each with one line of help.
  virtual std::vector<std::pair<std::string, std::string>> pipelines() const = 0;
  bool runs(const std::string& pipeline) const;
  // The input a case of `pipeline` at `height`x`width` image pixels runs on (batch 1); an
  // error when the size has none (e.g. not a multiple of a decoder's upscale).
  virtual Expected<Shape> input_shape(const ModelConfig& config, const std::string& pipeline,
                                      int64_t height, int64_t width) const = 0;
  // Image pixels per input element along the input's last two axes (a decoder's upscale).
  virtual int64_t input_scale(const ModelConfig& config, const std::string& pipeline) const = 0;
  // The pipeline's input among a file's tensors (the only one, or by name).
  virtual Expected<Tensor> select_input(const std::string& pipeline, const NamedTensors& tensors,
                                        const std::string& source) const = 0;
  // Every input the pipeline reads, by its name, among a file's tensors (the default: the one
  // select_input picks).
  virtual Expected<NamedTensors> select_inputs(const std::string& pipeline,
                                               const NamedTensors& tensors,
                                               const std::string& source) const;
  // Checks an input's shape; the error says what shape the pipeline takes.
  virtual Status check_input(const Model& model, const std::string& pipeline,
                             const Tensor& input) const = 0;
  // A case's generated input. `reference` runs graphs on the fp32 reference (a decoder's
  // real-image-like input is the reference encoder's latents of a picture).
  virtual Expected<Tensor> generate_input(const Model& model, const InputRequest& request,
                                          const GraphRunner& reference) const = 0;
  // Every input of a case, the primary one (what res= sizes, what a file replaces) first, named
  // as run() reads them (the default: generate_input's, named "input").
  virtual Expected<NamedTensors> generate_inputs(const Model& model, const InputRequest& request,
                                                 const GraphRunner& reference) const;

  // The inputs as the pipeline's graphs take them (checked; a UNet's scalar timestep broadcast to
  // the batch), so a runner can hand them to single groups too (the default: as given).
  virtual Expected<NamedTensors> bind_inputs(const Model& /*model*/,
                                             const std::string& /*pipeline*/,
                                             const NamedTensors& inputs) const {
    return inputs;
  }
  // Checks the inputs (select_inputs' names; a single-input pipeline takes any one tensor),
  // then runs the pipeline on `executor`.
  virtual Expected<NamedTensors> run(const Model& model, const std::string& pipeline,
                                     const NamedTensors& inputs, GraphExecutor& executor,
                                     const PipelineOptions& options = {}) const = 0;
  // The graphs `pipeline` runs at `input`, in order (to compile them ahead of a run).
  virtual Expected<std::vector<Stage>> stages(const Model& model, const std::string& pipeline,
                                              const Shape& input) const = 0;
  // For a chained pipeline, how its graphs join.
  virtual std::optional<Handoff> handoff(const std::string& /*pipeline*/) const { return {}; }
  // Whether the pipeline's output is an image in [-1, 1] (8-bit PSNR applies).
  virtual bool image_output(const std::string& pipeline) const = 0;
  // Whether errors made in `graph` reach a pipeline's output damped by the normalizations and
  // residual sums of the blocks after them (a denoiser's), for the output tolerance.
  virtual bool damps_errors(const std::string& /*graph*/) const { return false; }
  // Whether `pipeline` reads a refiner UNet (PipelineOptions::refiner).
  virtual bool takes_refiner(const std::string& /*pipeline*/) const { return false; }
  // How many tensors `pipeline` returns (the default: its last stage's graph outputs).
  virtual std::size_t output_count(const Model& model, const std::string& pipeline) const;
  // Whether tiling=on means anything for this family.
  virtual bool tiles() const { return false; }
  // Whether `pipeline` is a denoising loop (it takes steps and a guidance scale).
  virtual bool denoises(const std::string& /*pipeline*/) const { return false; }
  // Where the `call`-th run (from 0) of graph `graph` in one run of `pipeline` puts its
  // checkpoints: a prefix of their names ("step3/"), distinct for every call of a graph. The
  // default leaves a graph's first call unprefixed and names later ones "call1/", "call2/".
  virtual std::string call_scope(const std::string& pipeline, const std::string& graph,
                                 int call) const;
};

// Runs `pipeline` of the model's family (which checks the inputs first); a single tensor is
// a single-input pipeline's input.
Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const NamedTensors& inputs, GraphExecutor& executor,
                                 const PipelineOptions& options = {});
Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const NamedTensors& inputs, const GraphRunner& run,
                                 const PipelineOptions& options = {});
Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const Tensor& input, GraphExecutor& executor,
                                 const PipelineOptions& options = {});
Expected<NamedTensors> run_model(const Model& model, const std::string& pipeline,
                                 const Tensor& input, const GraphRunner& run,
                                 const PipelineOptions& options = {});

// The registry: the built-in families (registry.cpp), then those registered at run time.
const std::vector<const Family*>& families();
void register_family(const Family& family);

// The family whose config.json this is; the error lists the families twinpath runs.
Expected<const Family*> family_of_config(const nlohmann::json& config, const std::string& source);
Expected<std::shared_ptr<const ModelConfig>> parse_model_config(const nlohmann::json& config,
                                                                const std::string& source);
Expected<std::shared_ptr<const ModelConfig>> load_model_config(const std::string& path);
// Built-in configs over every family.
std::vector<std::string> builtin_config_names();
Expected<std::string> builtin_config_text(const std::string& name);
// Every pipeline name any family runs, and whether `name` is one.
std::vector<std::string> pipeline_names();
bool is_pipeline_name(const std::string& name);
// Whether a family runs `name` as a denoising loop.
bool is_denoising_pipeline(const std::string& name);
// "PIPELINE  help" lines for every pipeline of every family.
std::string pipelines_help();
// An error when `model`'s family does not run `pipeline`, naming the ones it does.
Status check_family_runs(const Model& model, const std::string& pipeline);
// The other models a pipeline reads, named by `vae_flag` / `refiner_flag` ("--vae" or "vae="):
// an error for one it would ignore (a VAE for a pipeline that returns latents, a refiner for a
// pipeline without one). Missing ones are the pipeline's own error.
Status check_other_models(const std::string& pipeline, bool vae, bool refiner,
                          const std::string& vae_flag, const std::string& refiner_flag);

}  // namespace tp
