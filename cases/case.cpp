#include "cases/case.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "harness/core/dtype.h"
#include "harness/core/format.h"
#include "harness/core/rng.h"
#include "harness/models/vae/vae_config.h"

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

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = std::strtoll(std::string(s).c_str(), nullptr, 10);
  return true;
}

bool parse_double(std::string_view s, double& out) {
  const std::string str(s);
  char* end = nullptr;
  out = std::strtod(str.c_str(), &end);
  return !str.empty() && end == str.c_str() + str.size();
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

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

std::string Case::policy_text() const {
  std::string p = "w=" + weight + ",a=" + activation + ",acc=" + accumulation;
  if (!scale.empty()) p += ",scale=" + scale;
  if (!saturation.empty()) p += ",sat=" + saturation;
  return p;
}

std::string resolution_text(int64_t height, int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

std::string Case::id() const {
  std::string res = " res=" + resolution_text(height, width);
  if (!stream.empty()) {
    res = " stream=";
    for (std::size_t i = 0; i < stream.size(); ++i)
      res += (i ? "+" : "") + resolution_text(stream[i].first, stream[i].second);
  }
  std::string s = pipeline + " model=" + model + res + " w=" + weight + " a=" + activation +
                  " acc=" + accumulation;
  if (!scale.empty()) s += " scale=" + scale;
  if (!saturation.empty()) s += " sat=" + saturation;
  if (!keep_fp32.empty()) s += " keep=" + join_list(keep_fp32, '+');
  if (tiling) s += " tiling=on";
  if (tile_min || tile_stride)
    s += " tile=" + std::to_string(tile_min) + ":" + std::to_string(tile_stride);
  if (input != "normal") s += " input=" + input;
  if (!boost_layer.empty()) s += " boost=" + boost_layer + "*" + format_double(boost_factor);
  if (!warm.empty()) s += " warm=" + warm;
  if (reload) s += " reload=on";
  if (interleave) s += " interleave=on";
  if (!inject.empty()) s += " inject=" + join_list(inject, '+');
  if (reference != "f32") s += " ref=" + reference;
  if (shapes != "exact") s += " shapes=" + shapes;
  if (memory_limit) s += " mem=" + memory_text(memory_limit);
  if (seed_variant != 0) s += " seed=" + std::to_string(seed_variant);
  return s;
}

uint64_t Case::seed() const { return hash_name(id()); }

std::string repro_command(const Case& c) { return "twinpath run --case '" + c.id() + "'"; }

Status apply_case_option(Case& c, std::string_view token) {
  const std::size_t eq = token.find('=');
  if (eq == std::string_view::npos || eq == 0) return Error("expected key=value");
  const std::string_view key = token.substr(0, eq), v = token.substr(eq + 1);
  if (v.empty()) return Error("the value is empty");
  if (key == "model") {
    c.model = std::string(v);
  } else if (key == "res") {
    if (!parse_resolution(v, c.height, c.width))
      return Error("expected res=HEIGHTxWIDTH in pixels, e.g. res=64x64");
    c.res_given = true;
  } else if (key == "stream") {
    c.stream.clear();
    for (const std::string& r : split_list(v, '+')) {
      int64_t h = 0, w = 0;
      if (!parse_resolution(r, h, w))
        return Error("'" + r +
                     "' is not a resolution; expected stream=HxW+HxW+..., e.g. stream=64x64+64x80");
      c.stream.emplace_back(h, w);
    }
    if (c.stream.size() > 64) return Error("a stream takes at most 64 resolutions");
    c.height = c.stream[0].first;
    c.width = c.stream[0].second;
  } else if (key == "shapes") {
    int64_t n = 0;
    if (v != "exact" &&
        !(v.substr(0, 7) == "bucket:" && parse_int(v.substr(7), n) && n > 0 && n <= 4096))
      return Error(
          "expected shapes=exact or shapes=bucket:N with N a size in pixels, e.g. "
          "shapes=bucket:32");
    c.shapes = std::string(v);
  } else if (key == "mem") {
    if (!parse_memory(v, c.memory_limit))
      return Error("expected mem=SIZE as a whole number of KiB, MiB or GiB, e.g. mem=24MiB");
  } else if (key == "w" || key == "a" || key == "acc" || key == "ref") {
    auto dt = parse_dtype(v);
    if (!dt.ok()) return dt.error();
    if (key == "ref" && v != "f32" && v != "f64") return Error("the reference runs in f32 or f64");
    (key == "w"     ? c.weight
     : key == "a"   ? c.activation
     : key == "acc" ? c.accumulation
                    : c.reference) = std::string(v);
  } else if (key == "scale") {
    if (v != "channel" && v != "tensor") return Error("expected scale=channel or scale=tensor");
    c.scale = std::string(v);
  } else if (key == "sat") {
    if (v != "satfinite" && v != "nonsat") return Error("expected sat=satfinite or sat=nonsat");
    c.saturation = std::string(v);
  } else if (key == "keep") {
    c.keep_fp32 = split_list(v, '+');
  } else if (key == "tiling") {
    if (v != "on" && v != "off") return Error("expected tiling=on or tiling=off");
    c.tiling = v == "on";
  } else if (key == "tile") {
    const std::size_t colon = v.find(':');
    if (colon == std::string_view::npos || !parse_int(v.substr(0, colon), c.tile_min) ||
        !parse_int(v.substr(colon + 1), c.tile_stride))
      return Error("expected tile=MIN:STRIDE in pixels, e.g. tile=64:48");
  } else if (key == "input") {
    c.input = std::string(v);
    double sigma = 0;
    if (v.rfind("normal*", 0) == 0 && (!parse_double(v.substr(7), sigma) || !(sigma > 0)))
      return Error("expected input=normal*SIGMA with a positive SIGMA");
    if (v.rfind("image", 0) == 0 && v != "image")
      return Error("expected input=image (a procedural picture)");
  } else if (key == "boost") {
    const std::size_t star = v.rfind('*');
    if (star == std::string_view::npos || star == 0 ||
        !parse_double(v.substr(star + 1), c.boost_factor))
      return Error(
          "expected boost=LAYER*FACTOR, e.g. boost=decoder.up_blocks.0.resnets.0.conv1*1000");
    c.boost_layer = std::string(v.substr(0, star));
  } else if (key == "seed") {
    if (!parse_int(v, c.seed_variant)) return Error("expected seed=N, a non-negative integer");
  } else if (key == "reload") {
    if (v != "on" && v != "off") return Error("expected reload=on or reload=off");
    c.reload = v == "on";
  } else if (key == "interleave") {
    if (v != "on" && v != "off") return Error("expected interleave=on or interleave=off");
    c.interleave = v == "on";
  } else if (key == "warm") {
    c.warm = std::string(v);
  } else if (key == "inject") {
    c.inject = split_list(v, '+');
  } else {
    return Error(
        "unknown option; a case takes model, res, stream, w, a, acc, scale, sat, keep, tiling, "
        "tile, input, "
        "boost, warm, reload, interleave, inject, ref, shapes, mem and seed");
  }
  return Status();
}

Status check_case(const Case& c) {
  if ((c.tile_min || c.tile_stride) && !c.tiling) return Error("tile=MIN:STRIDE needs tiling=on");
  if (!c.stream.empty() && c.res_given)
    return Error("a stream= case gives its resolutions in stream=; leave res= out");
  if (c.memory_limit && c.stream.empty())
    return Error("mem= is a stream's memory budget; it needs stream=HxW+HxW+...");
  if (c.interleave && (c.pipeline != "vae.roundtrip" || c.tiling))
    return Error(
        "interleave=on calls a roundtrip's encoder and decoder in turn: it needs vae.roundtrip "
        "without tiling");
  if (!c.stream.empty() && (c.tiling || !c.warm.empty() || c.reload || c.interleave))
    return Error(
        "a stream= case runs plain pipelines; tiling=, warm=, reload= and interleave= are cases of "
        "their own");
  return Status();
}

bool is_pipeline_name(std::string_view name) {
  return name == "vae.encode" || name == "vae.decode" || name == "vae.roundtrip";
}

Expected<Case> parse_case(std::string_view line) {
  const std::vector<Token> tokens = split(line);
  if (tokens.empty())
    return Error(
        "empty case line; a case starts with its pipeline (vae.encode, vae.decode, vae.roundtrip)");
  Case c;
  auto bad = [&](const Token& t, const std::string& what) {
    return Error("column " + std::to_string(t.column) + ": '" + std::string(t.text) + "': " + what);
  };
  const Token& first = tokens[0];
  if (!is_pipeline_name(first.text))
    return bad(first, "a case starts with its pipeline: vae.encode, vae.decode or vae.roundtrip");
  c.pipeline = std::string(first.text);
  for (std::size_t i = 1; i < tokens.size(); ++i)
    if (Status s = apply_case_option(c, tokens[i].text); !s.ok())
      return bad(tokens[i], s.error().message());
  TP_RETURN_IF_ERROR(check_case(c));
  return c;
}

}  // namespace tp
