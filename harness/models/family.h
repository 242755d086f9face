// A model family: one kind of diffusers model (AutoencoderKL, AutoencoderTiny, ...), and all
// twinpath needs to load, build and run it. Each family lives in its own folder under
// harness/models/ and is listed once in registry.cpp (or registered at run time with
// register_family, as a test's toy family is); `model init`, `exec`, `run`, `cases list`,
// `triage` and `tradeoff` find it through the registry.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/executor.h"
#include "harness/core/graph.h"

namespace tp {

class Family;
struct ConfigSpace;  // harness/models/config_space.h

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
// A video VAE also tiles in time (diffusers' use_framewise_encoding/decoding, on by default and
// apart from `enabled`): `framewise` false turns it off; its sizes are in video frames.
struct TilingOptions {
  bool enabled = false;
  int64_t sample_min = 0;
  int64_t sample_stride = 0;
  bool framewise = true;
  int64_t frames_min = 0;
  int64_t frames_stride = 0;
  // The same run with no tiling in space or in time (what a tiled output is measured against).
  static TilingOptions none() {
    TilingOptions o;
    o.framewise = false;
    return o;
  }
};

// The values of a run's pipeline options (PipelineOption): key -> value as written, in canonical
// form (PipelineOption::parse's), defaults left out.
using OptionValues = std::vector<std::pair<std::string, std::string>>;
// The value of `key` in `values`, or "" when it is not given.
std::string given_option(const OptionValues& values, const std::string& key);

struct PipelineOptions {
  TilingOptions tiling;
  // A chained pipeline (see Handoff) also returns the first graph's outputs, "<graph>.<name>",
  // read after the second graph ran.
  bool stage_outputs = false;
  // The family's options as given (PipelineOption; a missing one is its default), and the other
  // models the pipeline reads, by the key of the option that names them (not owned).
  OptionValues values;
  std::vector<std::pair<std::string, const Model*>> models;

  // The model named by option `key`, or null.
  const Model* model(const std::string& key) const;
};

// A graph a pipeline runs, with the input shape it runs at; or, when `from` names an output,
// on the previous stage's output of that name.
struct Stage {
  Graph graph;
  Shape input;
  std::string from;
};

// The rows and columns of a tiled output that lie in a blend band between tiles (where two tiles
// are mixed); all false when the input does not tile. Seam metrics compare these elements apart
// from the tile interiors.
// A video's bands also run across frames (`frames`: blended frames of temporal tiles; empty for
// an image).
struct SeamBands {
  std::vector<bool> rows, cols, frames;
  bool at(int64_t y, int64_t x) const { return rows[std::size_t(y)] || cols[std::size_t(x)]; }
  bool at(int64_t t, int64_t y, int64_t x) const {
    return (!frames.empty() && frames[std::size_t(t)]) || at(y, x);
  }
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
  bool image = false;         // input=image
  double sigma = 1;           // input=normal*SIGMA
  OptionValues options = {};  // the case's family options
};

// One option of a family's pipelines, declared beside its code: in a case line as KEY=VALUE, on
// exec, triage and tradeoff as --FLAG VALUE. Its default lives here and nowhere else.
struct PipelineOption {
  std::string key;            // "steps"
  std::string flag;           // "steps": --steps
  std::string syntax;         // "steps=N"
  std::string default_value;  // canonical text ("50"); "" when the option has none
  std::string help;           // one line
  // The value's canonical text, or what is wrong with it and what to write. (An option that
  // names another model is one a descriptor's OtherModel points at.)
  std::function<Expected<std::string>(std::string_view value)> parse;
};

// What a pipeline's output is.
enum class Produces { kLatents, kImage, kNoisePrediction };

// A denoising loop: the output of its scheduler step's graph that holds the latents after each
// step (its trajectory).
struct Denoising {
  std::string trajectory = "latents";
};

// Another model a pipeline reads beside its own: the option that names it, whether it is
// needed, what it does (for the error when it is missing), and the part of the call scopes its
// graph calls run under (GraphExecutor::set_part), or "" when its graphs' names tell them apart.
struct OtherModel {
  std::string option;  // "vae"
  bool required = true;
  std::string purpose;  // "decodes the latents with a VAE"
  std::string part;     // "refiner/"
};

// A pipeline, as data: runner, cases, CLI help, tradeoff and reports ask this, never its name.
struct PipelineDescriptor {
  std::string name;  // "vae.decode"
  std::string help;  // one line
  // diffusers' argument and output names; the primary input (what res= sizes) first.
  std::vector<std::string> inputs, outputs;
  Produces produces = Produces::kImage;
  std::optional<Denoising> denoising;
  // A denoiser's scheduler: the timesteps it was trained on (a timestep input is below it); 0
  // when the pipeline reads no timestep.
  int train_timesteps = 0;
  std::optional<Handoff> handoff;    // a chained pipeline's two graphs
  std::vector<std::string> options;  // the keys of the family's options it takes
  std::vector<OtherModel> models;    // other models, each named by one of `options`
  bool tiles = false;                // tiling=on runs it tiled (the family's tiling hooks)
  bool tiles_in_time = false;        // framewise= and tile_frames= apply (a video VAE's)
  // What a tradeoff measures it on: "image" (a real-image-like picture; a decoder, its latents)
  // or "normal" (seeded noise).
  std::string tradeoff_input = "normal";
  // The pipeline a tradeoff measures when none is named (the family's first one without it).
  bool tradeoff_default = false;
  bool image_output() const { return produces == Produces::kImage; }
  bool takes(const std::string& option) const;
};
// A descriptor with its names and what it produces; the other fields are set after it.
PipelineDescriptor describe_pipeline(std::string name, std::string help,
                                     std::vector<std::string> inputs,
                                     std::vector<std::string> outputs, Produces produces);

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

  // The space of valid configs `model=random:FAMILY:SEED` draws from, or null (config_space.h).
  virtual const ConfigSpace* config_space() const { return nullptr; }

  // Every graph the family builds for a config (what a plan file may hold plans for), and every
  // parameter the checkpoint must hold, in graph order.
  virtual std::vector<Graph> graphs(const ModelConfig& config) const = 0;
  virtual std::vector<ParamSpec> param_specs(const ModelConfig& config) const;

  // The pipelines, as data (one table per family, made once), and the options they take.
  virtual const std::vector<PipelineDescriptor>& pipelines() const = 0;
  virtual const std::vector<PipelineOption>& options() const;
  // The pipeline named `name`, or null when the family does not run it.
  const PipelineDescriptor* pipeline(const std::string& name) const;
  bool runs(const std::string& name) const { return pipeline(name) != nullptr; }
  // The declared option `key`, or null.
  const PipelineOption* option(const std::string& key) const;
  // The pipeline a tradeoff measures when none is named.
  const PipelineDescriptor& tradeoff_pipeline() const;
  // The input a case of `pipeline` at `height`x`width` image pixels runs on (batch 1), given
  // the case's family options (a video model's frames=); an error when the size has none (e.g.
  // not a multiple of a decoder's upscale).
  virtual Expected<Shape> input_shape(const ModelConfig& config, const std::string& pipeline,
                                      int64_t height, int64_t width,
                                      const OptionValues& options) const = 0;
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
  // Whether errors made in `graph` reach a pipeline's output damped by the normalizations and
  // residual sums of the blocks after them (a denoiser's), for the output tolerance.
  virtual bool damps_errors(const std::string& /*graph*/) const { return false; }
  // Tiling, for a family whose pipelines tile (PipelineDescriptor::tiles; the others keep these
  // defaults).
  // "" when a tiled stage's recorded decision (GraphExecutor::record_tiling) is what the
  // config's rule says at `options`; else what the rule says and what was done.
  virtual std::string check_tiling_decision(const ModelConfig& /*config*/,
                                            const TilingOptions& /*options*/,
                                            const TilingDecision& /*decision*/) const {
    return "";
  }
  // The blend bands of `pipeline`'s output for an input of shape `input`.
  virtual Expected<SeamBands> seam_bands(const ModelConfig& config, const TilingOptions& options,
                                         const std::string& pipeline, const Shape& input) const;
  // The resolutions (height, width, in pixels) around every tiling boundary of `pipeline` at
  // `options`: the sizes res=tiling stands for.
  virtual Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(
      const ModelConfig& config, const std::string& pipeline, const TilingOptions& options) const;
  // The share of a height x width image one tile covers at `options` (1 when it does not tile):
  // what a tiled run holds at once, for the memory estimate.
  virtual double tile_share(const ModelConfig& /*config*/, const TilingOptions& /*options*/,
                            int64_t /*height*/, int64_t /*width*/) const {
    return 1;
  }
  // How many times, at most, the tiles of a height x width image cover one pixel (tiles overlap):
  // what a tiled run that keeps every tile's values holds, in images (1 when it does not tile).
  virtual double tile_coverage(const ModelConfig& /*config*/, const TilingOptions& /*options*/,
                               int64_t /*height*/, int64_t /*width*/) const {
    return 1;
  }
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
// A built-in config's text, or a drawn one's ("random:FAMILY:SEED", config_space.h: the draw
// named in its "_twinpath_draw" key, which diffusers ignores).
Expected<std::string> builtin_config_text(const std::string& name);
// Whether `name` is a built-in config's or a drawn config's name (not whether the draw exists).
bool names_builtin_config(const std::string& name);
// The families with a config space, by its name ("autoencoder_kl").
std::vector<std::string> config_space_names();
// Every pipeline name any family runs, and whether `name` is one.
std::vector<std::string> pipeline_names();
bool is_pipeline_name(const std::string& name);
// The descriptor of `name` (the first family's that runs it), or null.
const PipelineDescriptor* find_pipeline(const std::string& name);
// "PIPELINE  help" lines for every pipeline of every family.
std::string pipelines_help();
// The pipelines (over every family) that `pred` holds for, as "a, b or c".
std::string pipelines_where(const std::function<bool(const PipelineDescriptor&)>& pred,
                            const std::string& last_joiner = " or ");
// An error when `model`'s family does not run `pipeline`, naming the ones it does.
Status check_family_runs(const Model& model, const std::string& pipeline);

// Every option any family declares, once per key, in registry order (the command line's flags,
// `twinpath cases options`).
std::vector<const PipelineOption*> all_pipeline_options();
// The option `key` as the families that run `pipeline` declare it, or null when none of them
// takes it for `pipeline`.
const PipelineOption* pipeline_option(const std::string& pipeline, const std::string& key);
// Checks and sets option `key` for `pipeline` (replacing an earlier value; a default is left
// out). `spelled` is how the user wrote the key ("steps=" or "--steps") for the error, which
// says which pipelines take the option when this one does not.
Status set_pipeline_option(OptionValues& values, const std::string& pipeline,
                           const std::string& key, std::string_view value,
                           const std::string& spelled);
// `values` in the order the family that runs `pipeline` declares its options (a case id's).
OptionValues ordered_options(const std::string& pipeline, const OptionValues& values);
// An error naming the first other model `pipeline` needs that `given` lacks, and how to add it.
Status check_required_models(const std::string& pipeline, const OptionValues& given);

// The value of option `key` for a run: as given, else `family`'s default for it.
std::string option_text(const Family& family, const PipelineOptions& options,
                        const std::string& key);
double option_number(const Family& family, const PipelineOptions& options, const std::string& key);

}  // namespace tp
