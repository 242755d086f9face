#include "cases/case.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cases/stress_inputs.h"
#include "harness/core/dtype.h"
#include "harness/core/format.h"
#include "harness/core/names.h"
#include "harness/core/rng.h"
#include "harness/models/family.h"

namespace tp {
namespace {

struct Token {
  std::string_view text;
  std::size_t column;  // 1-based
};

std::vector<Token> split(std::string_view line) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back({line.substr(start, i - start), start + 1});
  }
  return out;
}

bool parse_resolution(std::string_view v, int64_t& h, int64_t& w) {
  const std::size_t x = v.find('x');
  return x != std::string_view::npos && parse_int(v.substr(0, x), h) &&
         parse_int(v.substr(x + 1), w) && h > 0 && w > 0;
}

// Sizes as written in a case: a whole number of KiB, MiB or GiB.
std::string memory_text(int64_t bytes) {
  if (bytes % (int64_t(1) << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes % (int64_t(1) << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

bool parse_memory(std::string_view v, int64_t& bytes) {
  int shift = 0;
  if (v.size() > 3 && v.substr(v.size() - 3) == "KiB")
    shift = 10;
  else if (v.size() > 3 && v.substr(v.size() - 3) == "MiB")
    shift = 20;
  else if (v.size() > 3 && v.substr(v.size() - 3) == "GiB")
    shift = 30;
  int64_t n = 0;
  if (!shift || !parse_int(v.substr(0, v.size() - 3), n) || n <= 0) return false;
  bytes = n << shift;
  return true;
}

}  // namespace

std::string Case::policy_text() const {
  std::string p = dtypes_string(policy);
  if (scale_given) p += std::string(",scale=") + scale_name(policy.scale);
  if (saturation_given) p += std::string(",sat=") + saturation_name(policy.saturation);
  if (policy.clip != 1) p += ",clip=" + clip_text(policy.clip);
  if (policy.attention_in_activation) p += ",attn=act";
  if (policy.layerwise) p += ",cast=layerwise";
  return p;
}

std::optional<double> normal_sigma(const std::string& input) {
  if (input == "normal") return 1.0;
  if (input.rfind("normal*", 0) != 0) return std::nullopt;
  return parse_number<double>(std::string_view(input).substr(7));
}

std::string resolution_text(int64_t height, int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

namespace {

Status parse_dtype_into(DType& field, std::string_view v) {
  TP_ASSIGN_OR_RETURN(field, parse_dtype(v));
  return Status();
}

Status parse_switch(bool& field, std::string_view key, std::string_view v) {
  if (v != "on" && v != "off")
    return Error("expected " + std::string(key) + "=on or " + std::string(key) + "=off");
  field = v == "on";
  return Status();
}

std::string on_if(bool set) { return set ? "on" : ""; }

// A MIN:STRIDE pair (tile=, tile_frames=); `expected` says what to write.
Status parse_pair(std::string_view v, int64_t& min, int64_t& stride, const char* expected) {
  const std::size_t colon = v.find(':');
  if (colon == std::string_view::npos || !parse_int(v.substr(0, colon), min) ||
      !parse_int(v.substr(colon + 1), stride))
    return Error(std::string("expected ") + expected);
  return Status();
}
std::string pair_text(int64_t min, int64_t stride) {
  return min || stride ? std::to_string(min) + ":" + std::to_string(stride) : "";
}

// In id order. Options without a default (model, res, w, a, acc) always print.
const std::vector<CaseOption> kOptions = {
    {"model", "model=NAME[@SEED]|DIR",
     "a built-in config (weights seeded from its name, or from SEED) or a diffusers model folder",
     [](Case& c, std::string_view v) -> Status {
       c.model = std::string(v);
       return Status();
     },
     [](const Case& c) { return c.model; }},
    {"res", "res=HEIGHTxWIDTH",
     "the image resolution in pixels (decode's latents are res / the downscale)",
     [](Case& c, std::string_view v) -> Status {
       if (!parse_resolution(v, c.height, c.width))
         return Status(Error("expected res=HEIGHTxWIDTH in pixels, e.g. res=64x64"));
       c.res_given = true;
       return Status();
     },
     [](const Case& c) { return c.stream.empty() ? resolution_text(c.height, c.width) : ""; }},
    {"stream", "stream=HxW+HxW+...",
     "resolutions in order through one compiled session, counting compilations and memory",
     [](Case& c, std::string_view v) -> Status {
       c.stream.clear();
       for (const std::string& r : split_list(v, '+')) {
         int64_t h = 0, w = 0;
         if (!parse_resolution(r, h, w))
           return Status(Error("'" + r +
                               "' is not a resolution; expected stream=HxW+HxW+..., e.g. "
                               "stream=64x64+64x80"));
         c.stream.emplace_back(h, w);
       }
       if (c.stream.empty())
         return Status(
             Error("stream= names no resolution; expected stream=HxW+HxW+..., e.g. "
                   "stream=64x64+64x80"));
       if (c.stream.size() > 64) return Status(Error("a stream takes at most 64 resolutions"));
       c.height = c.stream[0].first;
       c.width = c.stream[0].second;
       return Status();
     },
     [](const Case& c) {
       std::string s;
       for (std::size_t i = 0; i < c.stream.size(); ++i)
         s += (i ? "+" : "") + resolution_text(c.stream[i].first, c.stream[i].second);
       return s;
     }},
    {"w", "w=DTYPE", "weight storage dtype: f32, f16, bf16, f8e4m3, f8e5m2",
     [](Case& c, std::string_view v) -> Status { return parse_dtype_into(c.policy.weight, v); },
     [](const Case& c) { return std::string(dtype_name(c.policy.weight)); }},
    {"a", "a=DTYPE", "activation storage dtype between fused groups: f32, f16, bf16",
     [](Case& c, std::string_view v) -> Status { return parse_dtype_into(c.policy.activation, v); },
     [](const Case& c) { return std::string(dtype_name(c.policy.activation)); }},
    {"acc", "acc=DTYPE", "matmul accumulation: f32 (f16 reproduces field bugs)",
     [](Case& c, std::string_view v) -> Status {
       return parse_dtype_into(c.policy.accumulation, v);
     },
     [](const Case& c) { return std::string(dtype_name(c.policy.accumulation)); }},
    {"scale", "scale=channel|tensor", "fp8 weight scales per output channel or per tensor",
     [](Case& c, std::string_view v) -> Status {
       if (v != "channel" && v != "tensor")
         return Status(Error("expected scale=channel or scale=tensor"));
       c.policy.scale = *parse_scale(v);
       c.scale_given = true;
       return Status();
     },
     [](const Case& c) { return c.scale_given ? std::string(scale_name(c.policy.scale)) : ""; }},
    {"sat", "sat=satfinite|nonsat", "fp8 weights saturate to the largest finite value, or overflow",
     [](Case& c, std::string_view v) -> Status {
       if (v != "satfinite" && v != "nonsat")
         return Status(Error("expected sat=satfinite or sat=nonsat"));
       c.policy.saturation = *parse_saturation(v);
       c.saturation_given = true;
       return Status();
     },
     [](const Case& c) {
       return c.saturation_given ? std::string(saturation_name(c.policy.saturation)) : "";
     }},
    {"clip", "clip=Q",
     "fp8 weight scales from the Q-quantile of |w| (e.g. 0.999), not the largest weight: the "
     "weights above it saturate or overflow as sat= says (default 1)",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.policy.clip, parse_clip(v));
       return Status();
     },
     [](const Case& c) { return c.policy.clip != 1 ? clip_text(c.policy.clip) : ""; }},
    {"attn", "attn=f32|act",
     "attention's q, k, v and softmax weights rounded to the activation dtype before its two "
     "products (act: as f16/bf16 attention kernels and tensor cores do), or fp32 (default)",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.policy.attention_in_activation, parse_attention(v));
       return Status();
     },
     [](const Case& c) { return c.policy.attention_in_activation ? std::string("act") : ""; }},
    {"cast", "cast=scaled|layerwise",
     "fp8 weights with fp32 scales (scaled, the default) or diffusers' layerwise casting: the "
     "block layers' weights and biases cast to fp8 without a scale, computed in a=",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.policy.layerwise, parse_cast(v));
       return Status();
     },
     [](const Case& c) { return c.policy.layerwise ? std::string("layerwise") : ""; }},
    {"cast-skip", "cast-skip=GLOB+GLOB",
     "cast=layerwise: the module globs left out of the casting, replacing diffusers' list (its "
     "defaults, the model's _keep_in_fp32_modules and _skip_layerwise_casting_patterns)",
     [](Case& c, std::string_view v) -> Status {
       c.cast_skip = split_list(v, '+');
       return Status();
     },
     [](const Case& c) { return c.cast_skip ? join_list(*c.cast_skip, '+') : ""; }},
    {"load", "load=DTYPE",
     "cast=layerwise: the dtype the model was loaded in before the casting (default a=); the "
     "layers the casting skips keep it",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.load, parse_dtype(v));
       return Status();
     },
     [](const Case& c) { return c.load ? std::string(dtype_name(*c.load)) : ""; }},
    {"fuse-qkv", "fuse-qkv=before-cast|after-cast",
     "cast=layerwise: fuse_qkv_projections() called before enable_layerwise_casting (the fused "
     "Linears are cast like the rest) or after it (they keep fp8 weights: refused)",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.fuse_qkv, parse_qkv_fusion(v));
       return Status();
     },
     [](const Case& c) { return std::string(qkv_fusion_name(c.fuse_qkv)); }},
    {"keep", "keep=GLOB+GLOB", "module globs kept in fp32 (--keep-fp32)",
     [](Case& c, std::string_view v) -> Status {
       c.keep_fp32 = split_list(v, '+');
       return Status();
     },
     [](const Case& c) { return join_list(c.keep_fp32, '+'); }},
    {"tiling", "tiling=on|off", "diffusers' enable_tiling() on both paths",
     [](Case& c, std::string_view v) -> Status { return parse_switch(c.tiling, "tiling", v); },
     [](const Case& c) { return on_if(c.tiling); }},
    {"tile", "tile=MIN:STRIDE", "tile size and stride in pixels (0: the config's)",
     [](Case& c, std::string_view v) -> Status {
       return parse_pair(v, c.tile_min, c.tile_stride,
                         "tile=MIN:STRIDE in pixels, e.g. tile=64:48");
     },
     [](const Case& c) { return pair_text(c.tile_min, c.tile_stride); }},
    {"framewise", "framewise=on|off",
     "a video VAE's tiling in time (diffusers' use_framewise_encoding/decoding: on by default)",
     [](Case& c, std::string_view v) -> Status {
       return parse_switch(c.framewise, "framewise", v);
     },
     [](const Case& c) { return std::string(c.framewise ? "" : "off"); }},
    {"tile_frames", "tile_frames=MIN:STRIDE",
     "a video VAE's temporal tile and stride in video frames (diffusers' 16:12 when absent)",
     [](Case& c, std::string_view v) -> Status {
       return parse_pair(v, c.tile_min_frames, c.tile_stride_frames,
                         "tile_frames=MIN:STRIDE in frames, e.g. tile_frames=16:12");
     },
     [](const Case& c) { return pair_text(c.tile_min_frames, c.tile_stride_frames); }},
    {"input", "input=normal|normal*SIGMA|image|dc*K|heavy|runs|range|FILE",
     "seeded normal values, a procedural picture (decode: its latents), a stress distribution "
     "(per-channel offsets of +-K, Student's t tails, runs of 8 equal values, magnitudes up to "
     "1/8 of f16's range) or a tensor file",
     [](Case& c, std::string_view v) -> Status {
       c.input = std::string(v);
       if (const std::string bad = check_stress_input(c.input); !bad.empty())
         return Status(Error(bad));
       double sigma = 0;
       if (v.rfind("normal*", 0) == 0 &&
           (!parse_double(v.substr(7), sigma) || !(sigma > 0) || !std::isfinite(sigma)))
         return Status(Error("expected input=normal*SIGMA with a positive, finite SIGMA"));
       if (v.rfind("image", 0) == 0 && v != "image")
         return Status(Error("expected input=image (a procedural picture)"));
       return Status();
     },
     [](const Case& c) { return c.input != "normal" ? c.input : ""; }},
    {"weights", "weights=ties|*K",
     "ties: reshapes the model's conv and linear weights so fp8 quantization meets exact ties "
     "(each channel's max |w| 1.75 * 2^m, 5 significant bits); *K: multiplies every conv and "
     "linear weight matrix by K",
     [](Case& c, std::string_view v) -> Status {
       if (v == "ties") {
         c.tie_weights = true;
         return Status();
       }
       double k = 0;
       if (v.empty() || v[0] != '*' || !parse_double(v.substr(1), k) || !(k > 0) ||
           !std::isfinite(k))
         return Status(Error("expected weights=ties or weights=*K with a positive, finite K"));
       c.weight_scale = k;
       return Status();
     },
     [](const Case& c) {
       if (c.tie_weights) return std::string("ties");
       return c.weight_scale != 1 ? "*" + printf_numbers("%.9g", c.weight_scale) : std::string();
     }},
    {"boost", "boost=LAYER*FACTOR",
     "multiplies one layer's weight and bias (an f16 overflow on demand; 0: a constant output)",
     [](Case& c, std::string_view v) -> Status {
       const std::size_t star = v.rfind('*');
       if (star == std::string_view::npos || star == 0 ||
           !parse_double(v.substr(star + 1), c.boost_factor))
         return Status(Error(
             "expected boost=LAYER*FACTOR, e.g. boost=decoder.up_blocks.0.resnets.0.conv1*1000"));
       c.boost_layer = std::string(v.substr(0, star));
       return Status();
     },
     [](const Case& c) {
       return c.boost_layer.empty() ? "" : c.boost_layer + "*" + format_double(c.boost_factor);
     }},
    {"warm", "warm=MODEL", "runs the pipeline on another model in the same session first",
     [](Case& c, std::string_view v) -> Status {
       c.warm = std::string(v);
       return Status();
     },
     [](const Case& c) { return c.warm; }},
    {"reload", "reload=on|off",
     "saves the plans, loads them into a fresh session, same bits required",
     [](Case& c, std::string_view v) -> Status { return parse_switch(c.reload, "reload", v); },
     [](const Case& c) { return on_if(c.reload); }},
    {"interleave", "interleave=on|off",
     "roundtrips: decode and encode called in turn in one session, isolated bits required",
     [](Case& c, std::string_view v) -> Status {
       return parse_switch(c.interleave, "interleave", v);
     },
     [](const Case& c) { return on_if(c.interleave); }},
    {"inject", "inject=FAULT+FAULT",
     "deliberate faults in the compiled path (exec --help lists them)",
     [](Case& c, std::string_view v) -> Status {
       c.inject = split_list(v, '+');
       return Status();
     },
     [](const Case& c) { return join_list(c.inject, '+'); }},
    {"expect", "expect=failed",
     "the case must fail (a known-bad configuration the gate must keep catching): FAILED counts "
     "as passed, and passing as failed",
     [](Case& c, std::string_view v) -> Status {
       if (v != "failed") return Status(Error("expected expect=failed"));
       c.expect_failure = true;
       return Status();
     },
     [](const Case& c) { return std::string(c.expect_failure ? "failed" : ""); }},
    {"ref", "ref=f32|f64", "the reference's precision",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(DType dt, parse_dtype(v));
       if (dt != DType::kF32 && dt != DType::kF64)
         return Status(Error("the reference runs in f32 or f64"));
       c.reference = dt;
       return Status();
     },
     [](const Case& c) {
       return c.reference != DType::kF32 ? std::string(dtype_name(c.reference)) : "";
     }},
    {"shapes", "shapes=exact|bucket:N", "the compiled session's shape policy (N in pixels)",
     [](Case& c, std::string_view v) -> Status {
       int64_t n = 0;
       if (v != "exact" &&
           !(v.substr(0, 7) == "bucket:" && parse_int(v.substr(7), n) && n > 0 && n <= 4096))
         return Status(
             Error("expected shapes=exact or shapes=bucket:N with N a size in pixels, e.g. "
                   "shapes=bucket:32"));
       c.shapes = std::string(v);
       return Status();
     },
     [](const Case& c) { return c.shapes != "exact" ? c.shapes : ""; }},
    {"mem", "mem=SIZE",
     "the case's memory budget (over --mem and the available memory): a case estimated past it "
     "is refused before it allocates; a stream's budget for its arenas. A whole number of KiB, "
     "MiB or GiB",
     [](Case& c, std::string_view v) -> Status {
       if (!parse_memory(v, c.memory_limit))
         return Status(
             Error("expected mem=SIZE as a whole number of KiB, MiB or GiB, e.g. mem=24MiB"));
       return Status();
     },
     [](const Case& c) { return c.memory_limit ? memory_text(c.memory_limit) : ""; }},
    {"kernels", "kernels=per-op|fused",
     "the CUDA kernel set (--device cuda; default: the run's --kernels, else "
     "TWINPATH_CUDA_KERNELS, else fused)",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.kernels, parse_cuda_kernels(v, "kernels="));
       return Status();
     },
     [](const Case& c) { return c.kernels ? std::string(cuda_kernels_name(*c.kernels)) : ""; }},
    {"graphs", "graphs=on|off",
     "CUDA graphs: replay each plan's kernels with one launch (--device cuda; default: the "
     "run's --cuda-graphs, else TWINPATH_CUDA_GRAPHS, else on)",
     [](Case& c, std::string_view v) -> Status {
       TP_ASSIGN_OR_RETURN(c.graphs, parse_cuda_graphs(v, "graphs="));
       return Status();
     },
     [](const Case& c) { return c.graphs ? std::string(*c.graphs ? "on" : "off") : ""; }},
    {"seed", "seed=N", "the same case on other seeded inputs",
     [](Case& c, std::string_view v) -> Status {
       if (!parse_int(v, c.seed_variant))
         return Status(Error("expected seed=N, a non-negative integer"));
       return Status();
     },
     [](const Case& c) { return c.seed_variant ? std::to_string(c.seed_variant) : ""; }},
};

}  // namespace

const std::vector<CaseOption>& case_options() { return kOptions; }

std::string case_options_help() {
  std::size_t width = 0;
  for (const CaseOption& o : kOptions) width = std::max(width, o.syntax.size());
  for (const PipelineOption* o : all_pipeline_options()) width = std::max(width, o->syntax.size());
  auto line = [&](std::string_view syntax, std::string_view help) {
    return "  " + std::string(syntax) + std::string(width + 2 - syntax.size(), ' ') +
           std::string(help) + "\n";
  };
  std::string s = "PIPELINE, then key=value options in any order. Pipelines:\n" + pipelines_help() +
                  "Options of every pipeline:\n";
  for (const CaseOption& o : kOptions) s += line(o.syntax, o.help);
  for (const Family* f : families()) {
    if (f->options().empty()) continue;
    s += "Options of " + f->class_name() + "'s pipelines:\n";
    for (const PipelineOption& o : f->options()) {
      const std::string takes = pipelines_where(
          [&](const PipelineDescriptor& d) { return f->runs(d.name) && d.takes(o.key); }, ", ");
      const std::string fallback = o.default_value.empty() ? "" : "; default " + o.default_value;
      s += line(o.syntax, o.help + fallback + " [" + takes + "]");
    }
  }
  return s;
}

// The family's options print after the dtype policy's (the order ids have always had).
bool family_options_follow(std::string_view key) { return key == "attn"; }

std::string Case::id() const {
  std::string s = pipeline;
  for (const CaseOption& o : kOptions) {
    if (std::string v = o.print(*this); !v.empty()) s += " " + std::string(o.key) + "=" + v;
    if (family_options_follow(o.key))
      for (const auto& [key, value] : ordered_options(pipeline, options))
        s += " " + key + "=" + value;
  }
  return s;
}

uint64_t Case::seed() const {
  Case c = *this;  // the backend changes summation order, not the inputs
  c.kernels.reset();
  c.graphs.reset();
  return hash_name(c.id());
}

std::string repro_command(const Case& c) { return "twinpath run --case '" + c.id() + "'"; }

Status apply_case_option(Case& c, std::string_view token) {
  const std::size_t eq = token.find('=');
  if (eq == std::string_view::npos || eq == 0) return Error("expected key=value");
  const std::string_view key = token.substr(0, eq), v = token.substr(eq + 1);
  if (v.empty()) return Error("the value is empty");
  for (const CaseOption& o : kOptions)
    if (o.key == key) return o.parse(c, v);
  std::vector<std::string> keys;
  for (const CaseOption& o : kOptions) keys.emplace_back(o.key);
  for (const PipelineOption* o : all_pipeline_options()) {
    if (o->key == key) return set_pipeline_option(c.options, c.pipeline, o->key, v, o->key + "=");
    keys.push_back(o->key);
  }
  std::string listed;
  for (std::size_t i = 0; i < keys.size(); ++i)
    listed += (i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + keys[i];
  const std::string meant = closest_name(key, keys);
  return Error("unknown option " + std::string(key) +
               (meant.empty() ? "" : " (did you mean " + meant + "?)") + "; a case takes " +
               listed + " (twinpath cases options explains them)");
}

Status apply_policy_text(Case& c, std::string_view policy) {
  for (const std::string& part : split_list(policy, ',')) {
    const std::string key = part.substr(0, part.find('='));
    if (key != "w" && key != "a" && key != "acc" && key != "scale" && key != "sat" &&
        key != "clip" && key != "attn" && key != "cast")
      return Error("field '" + part +
                   "' is unknown; use w=, a=, acc=, scale=, sat=, clip=, attn= and cast=");
    if (Status s = apply_case_option(c, part); !s.ok())
      return Error("field '" + part + "': " + s.error().message());
  }
  return Status();
}

Status check_case(const Case& c) {
  if (c.policy.clip != 1 && !dtype_is_fp8(c.policy.weight))
    return Error("clip= calibrates fp8 weight scales; it needs w=f8e4m3 or w=f8e5m2");
  if ((c.cast_skip || c.load || c.fuse_qkv != QkvFusion::kNone) && !c.policy.layerwise)
    return Error("cast-skip=, load= and fuse-qkv= describe layerwise casting; add cast=layerwise");
  if (c.policy.layerwise && (c.scale_given || c.policy.clip != 1))
    return Error(
        "cast=layerwise is a plain cast without a scale; scale= and clip= belong to fp8 weights "
        "with scales (leave cast= out)");
  if (c.policy.attention_in_activation && c.policy.activation == DType::kF32)
    return Error(
        "attn=act rounds attention's operands to the activation dtype; with a=f32 there is "
        "nothing to round them to: use a=f16 or a=bf16, or leave attn= out");
  if ((c.tile_min || c.tile_stride) && !c.tiling) return Error("tile=MIN:STRIDE needs tiling=on");
  if ((c.tile_min_frames || c.tile_stride_frames) && !c.framewise)
    return Error("tile_frames=MIN:STRIDE sizes the tiling in time that framewise=off turns off");
  if (!c.stream.empty() && c.res_given)
    return Error("a stream= case gives its resolutions in stream=; leave res= out");
  const PipelineDescriptor* d = find_pipeline(c.pipeline);
  if ((!c.framewise || c.tile_min_frames || c.tile_stride_frames) && d && !d->tiles_in_time)
    return Error("framewise= and tile_frames= size a video VAE's tiling in time; " + c.pipeline +
                 " does not tile in time (" +
                 pipelines_where([](const PipelineDescriptor& p) { return p.tiles_in_time; }) +
                 " do)");
  if (c.interleave && (!d || !d->handoff || c.tiling))
    return Error(
        "interleave=on calls a chained pipeline's two graphs in turn (a roundtrip's encoder and "
        "decoder): it needs " +
        pipelines_where([](const PipelineDescriptor& p) { return p.handoff.has_value(); }) +
        " without tiling");
  if (!c.stream.empty() && (c.tiling || !c.warm.empty() || c.reload || c.interleave))
    return Error(
        "a stream= case runs plain pipelines; tiling=, warm=, reload= and interleave= are cases of "
        "their own");
  return Status();
}

std::string pipeline_choices() { return comma_list(pipeline_names(), " or "); }

Expected<Case> parse_case(std::string_view line) {
  const std::vector<Token> tokens = split(line);
  if (tokens.empty())
    return Error("empty case line; a case starts with its pipeline (" + pipeline_choices() + ")");
  Case c;
  auto bad = [&](const Token& t, const std::string& what) {
    return Error("column " + std::to_string(t.column) + ": '" + std::string(t.text) + "': " + what);
  };
  const Token& first = tokens[0];
  if (!is_pipeline_name(std::string(first.text)))
    return bad(first, "a case starts with its pipeline: " + pipeline_choices() +
                          did_you_mean(first.text, pipeline_names()));
  c.pipeline = std::string(first.text);
  for (std::size_t i = 1; i < tokens.size(); ++i)
    if (Status s = apply_case_option(c, tokens[i].text); !s.ok())
      return bad(tokens[i], s.error().message());
  TP_RETURN_IF_ERROR(check_case(c));
  return c;
}

bool parse_memory_size(std::string_view text, int64_t& bytes) { return parse_memory(text, bytes); }

}  // namespace tp
