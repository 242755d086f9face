// Ports AutoencoderKL._tiled_encode / tiled_decode / blend_v / blend_h and AutoencoderTiny's
// _tiled_encode / _tiled_decode (diffusers autoencoder_kl.py L242-411, autoencoder_tiny.py
// L147-257), plainly: every tile kept, blended in place in row-major order, then cropped and
// concatenated. Arithmetic in double, as diffusers' float64 runs; AutoencoderTiny's output
// buffer is float32 whatever the model dtype, and so is its blend mask, as upstream.
#include "harness/models/vae/tiling.h"

#include <algorithm>
#include <cmath>

#include "harness/models/vae/vae_graphs.h"

namespace tp {
namespace {

// t[:, :, y:y+h, x:x+w] (clipped), of an f64 tensor.
Tensor crop(const Tensor& t, int64_t y, int64_t x, int64_t h, int64_t w) {
  const Tensor& src = t;
  const int64_t b = t.dim(0), c = t.dim(1), H = t.dim(2), W = t.dim(3);
  h = std::min(h, H - y);
  w = std::min(w, W - x);
  Tensor out(DType::kF64, {b, c, h, w});
  for (int64_t n = 0; n < b * c; ++n)
    for (int64_t r = 0; r < h; ++r)
      for (int64_t q = 0; q < w; ++q)
        out.data<double>()[(n * h + r) * w + q] = src.data<double>()[(n * H + y + r) * W + x + q];
  return out;
}

double& at(Tensor& t, int64_t n, int64_t y, int64_t x) {
  return t.data<double>()[(n * t.dim(2) + y) * t.dim(3) + x];
}

// blend_v / blend_h: b's first rows (columns) ramp from a's last ones, in place on b.
void blend_v(Tensor& a, Tensor& b, int64_t extent) {
  extent = std::min({a.dim(2), b.dim(2), extent});
  for (int64_t n = 0; n < b.dim(0) * b.dim(1); ++n)
    for (int64_t y = 0; y < extent; ++y)
      for (int64_t x = 0; x < b.dim(3); ++x)
        at(b, n, y, x) = at(a, n, a.dim(2) - extent + y, x) * (1 - double(y) / double(extent)) +
                         at(b, n, y, x) * (double(y) / double(extent));
}
void blend_h(Tensor& a, Tensor& b, int64_t extent) {
  extent = std::min({a.dim(3), b.dim(3), extent});
  for (int64_t n = 0; n < b.dim(0) * b.dim(1); ++n)
    for (int64_t y = 0; y < b.dim(2); ++y)
      for (int64_t x = 0; x < extent; ++x)
        at(b, n, y, x) = at(a, n, y, a.dim(3) - extent + x) * (1 - double(x) / double(extent)) +
                         at(b, n, y, x) * (double(x) / double(extent));
}

Expected<Tensor> run_one(const GraphRunner& run, const Graph& g, const Weights& w,
                         const Tensor& tile, const std::string& out) {
  TP_ASSIGN_OR_RETURN(NamedTensors o, run(g, w, {{g.inputs[0].first, tile}}));
  return find_tensor(o, out)->to(DType::kF64);
}

// AutoencoderKL: tiles of `min` every `stride`, blended over `blend`, cropped to `limit`.
Expected<Tensor> blended_tiled(const Tensor& x, const Graph& g, const Weights& w,
                               const GraphRunner& run, const std::string& out, int64_t min,
                               int64_t stride, int64_t blend, int64_t limit) {
  std::vector<std::vector<Tensor>> rows;
  for (int64_t i = 0; i < x.dim(2); i += stride) {
    rows.emplace_back();
    for (int64_t j = 0; j < x.dim(3); j += stride) {
      TP_ASSIGN_OR_RETURN(Tensor t, run_one(run, g, w, crop(x, i, j, min, min), out));
      rows.back().push_back(std::move(t));
    }
  }
  int64_t height = 0, width = 0;
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      if (i > 0) blend_v(rows[i - 1][j], rows[i][j], blend);
      if (j > 0) blend_h(rows[i][j - 1], rows[i][j], blend);
    }
  for (const Tensor& t : rows[0]) width += std::min(limit, t.dim(3));
  for (const auto& row : rows) height += std::min(limit, row[0].dim(2));
  Tensor result(DType::kF64, {x.dim(0), rows[0][0].dim(1), height, width});
  int64_t y0 = 0;
  for (const auto& row : rows) {
    int64_t x0 = 0;
    for (const Tensor& t : row) {
      const int64_t h = std::min(limit, t.dim(2)), wd = std::min(limit, t.dim(3));
      for (int64_t n = 0; n < t.dim(0) * t.dim(1); ++n)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t q = 0; q < wd; ++q)
            at(result, n, y0 + y, x0 + q) = t.data<double>()[(n * t.dim(2) + y) * t.dim(3) + q];
      x0 += wd;
    }
    y0 += std::min(limit, row[0].dim(2));
  }
  return result;
}

// AutoencoderTiny: each tile blended into a zeroed float32 output with ramp masks
// clamp(k / (blend - 1), 0, 1) over the output tile's first `blend` pixels.
Expected<Tensor> masked_tiled(const Tensor& x, const Graph& g, const Weights& w,
                              const GraphRunner& run, const std::string& out_name, int64_t channels,
                              int64_t tile, int64_t traverse, int64_t out_tile, double ramp_div,
                              bool up) {
  const int64_t sf_num = up ? out_tile / tile : 1, sf_den = up ? 1 : tile / out_tile;
  Tensor out(DType::kF32,
             {x.dim(0), channels, x.dim(2) * sf_num / sf_den, x.dim(3) * sf_num / sf_den});
  std::vector<float> mask(static_cast<std::size_t>(out_tile));
  for (int64_t k = 0; k < out_tile; ++k)
    mask[std::size_t(k)] = std::clamp(float(k) / float(ramp_div), 0.0f, 1.0f);
  for (int64_t i = 0; i < x.dim(2); i += traverse)
    for (int64_t j = 0; j < x.dim(3); j += traverse) {
      TP_ASSIGN_OR_RETURN(Tensor t, run_one(run, g, w, crop(x, i, j, tile, tile), out_name));
      const int64_t oy = i * sf_num / sf_den, ox = j * sf_num / sf_den;
      const int64_t h = std::min(t.dim(2), out.dim(2) - oy),
                    wd = std::min(t.dim(3), out.dim(3) - ox);
      for (int64_t n = 0; n < out.dim(0) * channels; ++n)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t q = 0; q < wd; ++q) {
            const float m =
                (i == 0 ? 1.0f : mask[std::size_t(y)]) * (j == 0 ? 1.0f : mask[std::size_t(q)]);
            float& o = out.data<float>()[(n * out.dim(2) + oy + y) * out.dim(3) + ox + q];
            o = float(double(m) * t.data<double>()[(n * t.dim(2) + y) * t.dim(3) + q] +
                      double(1.0f - m) * double(o));
          }
    }
  return out;
}

Expected<NamedTensors> tiled_stage(const Model& m, Pipeline stage, const Tensor& input,
                                   const GraphRunner& run, const TileGeometry& g) {
  const VaeConfig& c = vae_config(m);
  const Tensor x = input.to(DType::kF64);
  if (!tiling_engages(g, stage, x.shape())) {
    const Graph graph =
        stage == Pipeline::kDecode ? build_decoder_graph(c) : build_encoder_graph(c);
    return run(graph, m.weights, {{graph.inputs[0].first, x}});
  }
  if (g.masks) {
    const bool dec = stage == Pipeline::kDecode;
    const Graph graph = dec ? build_decoder_graph(c) : build_encoder_graph(c);
    const int64_t tile = dec ? g.latent_min : g.sample_min,
                  stride = dec ? g.decode_stride : g.encode_stride;
    const int64_t blend = dec ? g.decode_blend : g.encode_blend;
    const int64_t out_tile = dec ? tile * g.ratio : tile / g.ratio;
    const double ramp = dec ? double(blend * g.ratio - 1) : double(blend) / double(g.ratio) - 1;
    TP_ASSIGN_OR_RETURN(Tensor t, masked_tiled(x, graph, m.weights, run, dec ? "sample" : "latents",
                                               dec ? c.image_channels() : c.latent_channels(), tile,
                                               stride, out_tile, ramp, dec));
    return NamedTensors{{dec ? "sample" : "latents", t}};
  }
  if (stage == Pipeline::kDecode) {
    TP_ASSIGN_OR_RETURN(
        Tensor t, blended_tiled(x, build_decoder_graph(c), m.weights, run, "sample", g.latent_min,
                                g.decode_stride, g.decode_blend, g.sample_min - g.decode_blend));
    return NamedTensors{{"sample", t}};
  }
  TP_ASSIGN_OR_RETURN(Tensor moments, blended_tiled(x, c.moments_graph(), m.weights, run, "moments",
                                                    g.sample_min, g.encode_stride, g.encode_blend,
                                                    g.latent_min - g.encode_blend));
  // DiagonalGaussianDistribution after blending: chunk, then clamp logvar.
  const int64_t l = c.latent_channels();
  Tensor halves = moments.reshaped({moments.dim(0), 2, l * moments.dim(2) * moments.dim(3)});
  Tensor mu(DType::kF64, {moments.dim(0), l, moments.dim(2), moments.dim(3)}),
      logvar(DType::kF64, mu.shape());
  const int64_t per = l * moments.dim(2) * moments.dim(3);
  for (int64_t n = 0; n < moments.dim(0); ++n)
    for (int64_t k = 0; k < per; ++k) {
      mu.data<double>()[n * per + k] = halves.data<double>()[(n * 2) * per + k];
      logvar.data<double>()[n * per + k] =
          std::clamp(halves.data<double>()[(n * 2 + 1) * per + k], -30.0, 20.0);
    }
  return NamedTensors{{"mean", mu}, {"logvar", logvar}};
}

}  // namespace

Expected<TileGeometry> tile_geometry(const VaeConfig& c, const TilingOptions& o) {
  TileGeometry g;
  const VaeTilingStyle style = c.tiling_style();
  g.masks = style.masks;
  g.ratio = style.ratio;
  g.sample_min = o.sample_min ? o.sample_min : style.sample_min;
  if (g.masks) {
    g.latent_min = g.sample_min / g.ratio;
    g.encode_blend =
        o.sample_stride ? g.sample_min - o.sample_stride : int64_t(double(g.sample_min) * 0.125);
    g.decode_blend = o.sample_stride ? g.latent_min - o.sample_stride / g.ratio
                                     : int64_t(double(g.latent_min) * 0.125);
    g.encode_stride = g.sample_min - g.encode_blend;
    g.decode_stride = g.latent_min - g.decode_blend;
  } else {
    g.latent_min = int64_t(double(g.sample_min) / double(g.ratio));
    if (o.sample_stride) {
      g.encode_stride = o.sample_stride;
      g.decode_stride = o.sample_stride / g.ratio;
      g.encode_blend = g.latent_min - g.decode_stride;
      g.decode_blend = g.sample_min - o.sample_stride;
    } else {
      g.encode_stride = int64_t(double(g.sample_min) * 0.75);
      g.decode_stride = int64_t(double(g.latent_min) * 0.75);
      g.encode_blend = int64_t(double(g.latent_min) * 0.25);
      g.decode_blend = int64_t(double(g.sample_min) * 0.25);
    }
  }
  if (g.latent_min < 1 || g.encode_stride < 1 || g.decode_stride < 1 || g.encode_blend < 0 ||
      g.decode_blend < 0)
    return Error("tile min " + std::to_string(g.sample_min) + " px with stride " +
                 std::to_string(o.sample_stride) +
                 " px gives an empty tile or step for this model (latent ratio " +
                 std::to_string(g.ratio) + "); use a tile min of at least " +
                 std::to_string(2 * g.ratio) + " px and a stride between " +
                 std::to_string(g.ratio) + " px and the tile min");
  if (o.sample_stride > g.sample_min)
    return Error("tile stride must not exceed the tile min (" + std::to_string(g.sample_min) +
                 " px)");
  return g;
}

bool tiling_engages(const TileGeometry& g, Pipeline stage, const Shape& s) {
  if (g.masks) return true;  // AutoencoderTiny tiles whenever tiling is on
  const int64_t limit = stage == Pipeline::kDecode ? g.latent_min : g.sample_min;
  return s[3] > limit || s[2] > limit;
}

namespace {

// Bands along one axis of one stage's output, for an input extent `n`: tile k > 0 starts at
// `start(k)` and blends over its first `band` outputs.
std::vector<bool> axis_bands(const TileGeometry& g, Pipeline stage, int64_t n, bool engaged) {
  const bool dec = stage == Pipeline::kDecode;
  const int64_t out_n = dec ? n * g.ratio : n / g.ratio;
  std::vector<bool> bands(std::size_t(std::max<int64_t>(out_n, 0)), false);
  if (!engaged) return bands;
  const int64_t stride = dec ? g.decode_stride : g.encode_stride;
  int64_t start = 0;  // KL: where tile k's cropped output begins
  for (int64_t i = 0, k = 0; i < n; i += stride, ++k) {
    int64_t first = 0, band = 0;
    if (g.masks) {  // masks clamp(y / div, 0, 1) < 1 over y < div
      first = dec ? i * g.ratio : i / g.ratio;
      const double div =
          dec ? double(g.decode_blend * g.ratio - 1) : double(g.encode_blend) / double(g.ratio) - 1;
      band = int64_t(std::ceil(div));
    } else {
      const int64_t tile_in = std::min(dec ? g.latent_min : g.sample_min, n - i);
      const int64_t tile_out = dec ? tile_in * g.ratio : tile_in / g.ratio;
      const int64_t blend = dec ? g.decode_blend : g.encode_blend;
      const int64_t limit = dec ? g.sample_min - g.decode_blend : g.latent_min - g.encode_blend;
      first = start;
      band = std::min(blend, tile_out);
      start += std::min(limit, tile_out);
    }
    if (k == 0) continue;
    for (int64_t y = first; y < std::min(first + band, out_n); ++y) bands[std::size_t(y)] = true;
  }
  return bands;
}

}  // namespace

SeamBands seam_bands(const TileGeometry& g, Pipeline p, const Shape& s) {
  // Tiling engages on the whole input: then both axes step by the stride, even one within the min.
  auto bands = [&](Pipeline stage, const Shape& in) {
    const bool on = tiling_engages(g, stage, in);
    return SeamBands{axis_bands(g, stage, in[2], on), axis_bands(g, stage, in[3], on), {}};
  };
  if (p != Pipeline::kRoundtrip) return bands(p, s);
  // Encode bands are latent rows: every pixel row they decode to is in the band too.
  SeamBands out = bands(Pipeline::kDecode, {s[0], s[1], s[2] / g.ratio, s[3] / g.ratio});
  const SeamBands enc = bands(Pipeline::kEncode, s);
  const std::vector<bool>&er = enc.rows, &ec = enc.cols;
  for (std::size_t y = 0; y < out.rows.size(); ++y)
    out.rows[y] =
        out.rows[y] || (y / std::size_t(g.ratio) < er.size() && er[y / std::size_t(g.ratio)]);
  for (std::size_t x = 0; x < out.cols.size(); ++x)
    out.cols[x] =
        out.cols[x] || (x / std::size_t(g.ratio) < ec.size() && ec[x / std::size_t(g.ratio)]);
  return out;
}

Expected<NamedTensors> run_plain_tiled(const Model& m, Pipeline p, const Tensor& input,
                                       GraphExecutor& executor, const TilingOptions& o) {
  TP_RETURN_IF_ERROR(check_pipeline_input(m, p, input));
  TP_ASSIGN_OR_RETURN(TileGeometry g, tile_geometry(vae_config(m), o));
  const GraphRunner run = [&executor](const Graph& graph, const Weights& w,
                                      const NamedTensors& in) {
    return executor.run(graph, w, in);
  };
  if (p != Pipeline::kRoundtrip) return tiled_stage(m, p, input, run, g);
  TP_ASSIGN_OR_RETURN(NamedTensors enc, tiled_stage(m, Pipeline::kEncode, input, run, g));
  return tiled_stage(m, Pipeline::kDecode, enc[0].second, run, g);
}

}  // namespace tp
