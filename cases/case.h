// A case: one pipeline x model x input x resolution x dtype policy x configuration. Its
// canonical one-line text is its id, its repro (`twinpath run --case 'LINE'`) and the source of
// its seed. A line is whitespace-separated: the pipeline first, then key=value options.
//   vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 [scale=channel|tensor]
//     [sat=satfinite|nonsat] [clip=Q] [attn=f32|act] [keep=GLOB+GLOB] [tiling=on] [tile=MIN:STRIDE]
//     [framewise=on|off] [tile_frames=MIN:STRIDE]
//     [input=normal|normal*SIGMA|image|dc*K|heavy|runs|FILE] [weights=ties|*K] [boost=LAYER*FACTOR]
//     [warm=MODEL] [inject=FAULT+FAULT] [ref=f64] [reload=on] [interleave=on] [seed=N]
//     [shapes=exact|bucket:N] [kernels=per-op|fused] [graphs=on|off]
//   PIPELINE ... [KEY=VALUE of the pipeline's family: steps=, guidance=, vae=, ...]
//   vae.decode model=tiny-kl stream=64x64+64x80+96x96 [shapes=bucket:N] [mem=SIZE] ...
// `res` is the image resolution (height x width, pixels) for every pipeline: decode's latents
// are res / the model's downscale. `model` is a built-in config name (weights seeded from the
// name, so every case on it shares one model; `tiny-kl@7` seeds them with 7), a config drawn
// from a family's space of valid configs (`random:autoencoder_kl:12`, weights seeded the same
// way; harness/models/config_space.h) or a diffusers model folder. `boost` multiplies one layer's
// weights (and bias) by FACTOR: the SDXL-VAE f16 overflow, or 0 for a constant output. `warm` runs
// the same pipeline on another model in the same compiled session first (one runtime shared by two
// models: a plan cache keyed without the weights would hand this case the other model's plan).
// Cases that share a runtime (warm=, a roundtrip's co-resident encoder and decoder) must also equal
// isolated runs bit for bit. `reload=on` saves the plans, loads them into a fresh session and
// requires the same bits (field report 2). `interleave=on` (roundtrips) then calls decode and
// encode in turn in one session, one VAE shared by both pipelines, and requires each call's
// isolated bits. `input=image` is a procedural real-image-like picture (smooth regions, hard edges,
// saturated colours, noise); decode cases take the reference encoder's latents of it. `input=dc*K`,
// `heavy` and `runs` stress the numerics (cases/stress_inputs.h): per-channel offsets of +-K
// (norms whose mean dwarfs the spread), Student's t tails, runs of 8 equal values (softmax ties).
// `weights=ties` reshapes the model's conv and linear weights so fp8 quantization meets exact ties
// (harness/models/model.h make_weights_tie_prone); `weights=*K` multiplies every conv and linear
// weight matrix by K (scale_weight_matrices; the input search of a drawn config writes it).
// `stream=` runs resolutions in order through one compiled session (field report 5): each is
// compared with the reference; the report counts compilations, compile time and arena memory
// per step; with shapes=bucket:N each output must also equal the exact-shape one; with
// mem=SIZE (e.g. 24MiB) a resolution whose arena cannot fit must be refused, before allocating,
// with the figure it needs. `res=tiling` in a suite line is a generator (cases/tiling_points.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/cuda_choice.h"
#include "harness/core/dtype_policy.h"
#include "harness/core/layerwise_casting.h"
#include "harness/core/status.h"
#include "harness/models/family.h"

namespace tp {

struct Case {
  std::string pipeline;  // one a family runs (parse_case checks it)
  std::string model = "tiny-kl";
  int64_t height = 64, width = 64;
  LayerPolicy
      policy;  // w=, a=, acc=, scale=, sat=, clip=, attn= (any dtypes: refusals are cases too)
  bool scale_given = false, saturation_given = false;  // written in the line: kept in the id
  std::vector<std::string> keep_fp32;                  // module globs
  // cast=layerwise: the user's skip list (module globs replacing diffusers'), and the dtype the
  // model was loaded in before the casting (compiled::DTypePolicy::cast_skip, load).
  std::optional<std::vector<std::string>> cast_skip;
  std::optional<DType> load;
  QkvFusion fuse_qkv = QkvFusion::kNone;  // when fuse_qkv_projections() ran (fuse-qkv=)
  bool tiling = false;
  int64_t tile_min = 0, tile_stride = 0;  // 0: the model config's
  // A video VAE's tiling in time (TilingOptions): on unless framewise=off; sizes in frames.
  bool framewise = true;
  int64_t tile_min_frames = 0, tile_stride_frames = 0;  // 0: diffusers' defaults
  std::string input = "normal";
  bool tie_weights = false;  // weights=ties: make_weights_tie_prone (fp8 rounding ties)
  double weight_scale = 1;   // weights=*K: every conv and linear weight matrix times K
  std::string boost_layer;
  double boost_factor = 1;
  std::string warm;  // a model run first in the same session
  // The options the pipeline's family declares (steps=, vae=, ...: `twinpath cases options`),
  // canonical and in the family's order, defaults left out.
  OptionValues options;
  // Given by `run --case`: a refusal (unsupported, skipped) is then the run's answer, printed
  // with its reason and repro, not a count. Not part of the id.
  bool named = false;
  bool reload = false;              // plans saved, loaded into a fresh session, run again
  bool interleave = false;          // roundtrips: encode and decode called in turn in one session
  std::vector<std::string> inject;  // fault names
  bool expect_failure = false;      // expect=failed: FAILED is the pass (and passing a failure)
  DType reference = DType::kF32;    // f32 | f64
  int64_t seed_variant = 0;         // seed=N: the same case with other random inputs
  std::string shapes = "exact";     // the compiled session's shape policy
  std::vector<std::pair<int64_t, int64_t>> stream;  // resolutions in order (height, width)
  int64_t memory_limit = 0;                         // bytes; 0: the machine's
  // The CUDA backend's kernel set and graphs (kernels=, graphs=; the run's when not written):
  // in the id, so a device failure reproduces from its line, but not in the seed.
  std::optional<CudaKernels> kernels;
  std::optional<bool> graphs;
  bool res_given = false;  // parsing only: res= was written

  // The canonical line (options in a fixed order, defaults left out): the case id.
  std::string id() const;
  uint64_t seed() const;  // from the id only, less kernels= and graphs=
  // `w=..,a=..,acc=..[,scale=..][,sat=..]` as the line writes it (the compiled path's syntax).
  std::string policy_text() const;
};

// Parses one case line; errors name the token (by its column) and what was expected.
Expected<Case> parse_case(std::string_view line);

// One option of a case line: its key, syntax and help (`twinpath cases options`, error
// messages), how it parses into a Case and how it prints in the id ("" leaves it out: a
// default). The table is in id order; adding an option is one entry.
struct CaseOption {
  std::string_view key;
  std::string_view syntax;  // "res=HEIGHTxWIDTH"
  std::string_view help;
  Status (*parse)(Case& c, std::string_view value);
  std::string (*print)(const Case& c);
};
const std::vector<CaseOption>& case_options();
// The table as text, one option per line (`twinpath cases options`).
std::string case_options_help();

// The pieces parse_case is made of (suite expansion reports errors per token with them):
// one `key=value` option applied to `c`, the checks across options, and pipeline names.
Status apply_case_option(Case& c, std::string_view token);
Status check_case(const Case& c);
// The policy fields of `--policy w=..,a=..,acc=..[,scale=..][,sat=..]` as the case's w=, a=,
// acc=, scale=, sat=, clip= and attn= options.
Status apply_policy_text(Case& c, std::string_view policy);
std::string resolution_text(int64_t height, int64_t width);  // "64x80"
// The SIGMA of a case's input=normal (1) or input=normal*SIGMA; none for any other input.
std::optional<double> normal_sigma(const std::string& input);
// A size as a case's mem= and `--mem` take it: a whole number of KiB, MiB or GiB ("8GiB").
bool parse_memory_size(std::string_view text, int64_t& bytes);
// "vae.encode, vae.decode or vae.roundtrip": every pipeline a family runs.
std::string pipeline_choices();

// The one-line repro of a case.
std::string repro_command(const Case& c);

}  // namespace tp
