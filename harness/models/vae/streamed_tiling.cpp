#include "harness/models/vae/streamed_tiling.h"

#include <algorithm>
#include <cstring>

#include "harness/models/vae/streamed_blend.h"
#include "harness/models/vae/vae_graphs.h"

namespace tp {
namespace {

void store_rounded(const float* src, int64_t n, DType dt, std::byte* dst) {
  convert_elements(src, DType::kF32, dst, dt, std::size_t(n));
}

// An NCHW fp32 tile.
struct Tile {
  int64_t b = 0, c = 0, h = 0, w = 0;
  std::vector<float> v;
  float& at(int64_t n, int64_t y, int64_t x) { return v[std::size_t((n * h + y) * w + x)]; }
};

Tile to_tile(const Tensor& t) {
  Tile out{t.dim(0), t.dim(1), t.dim(2), t.dim(3), std::vector<float>(std::size_t(t.numel()))};
  const Tensor f = t.to(DType::kF32);
  std::memcpy(out.v.data(), f.raw(), f.nbytes());
  return out;
}

// Sizes as upstream computes them; the decode width threshold is where field report 4's bug
// lived (tile_sample_stride_width // ratio instead of tile_sample_min_width // ratio).
struct Layout {
  bool masks = false;  // VaeTilingStyle::masks
  int64_t ratio = 8, smin = 0, lmin = 0, stride_px = 0, stride_lat = 0, blend_px = 0, blend_lat = 0;
  int64_t decode_threshold_h = 0, decode_threshold_w = 0;
};

Expected<Layout> layout_for(const VaeConfig& c, const TilingOptions& o,
                            bool threshold_from_stride) {
  Layout l;
  const VaeTilingStyle style = c.tiling_style();
  l.masks = style.masks;
  l.ratio = style.ratio;
  l.smin = o.sample_min > 0 ? o.sample_min : style.sample_min;
  l.lmin = l.smin / l.ratio;
  if (o.sample_stride > 0) {
    l.stride_px = o.sample_stride;
    l.stride_lat = o.sample_stride / l.ratio;
  } else if (l.masks) {  // overlap factor 1/8
    l.stride_px = l.smin - l.smin / 8;
    l.stride_lat = l.lmin - l.lmin / 8;
  } else {  // overlap factor 1/4
    l.stride_px = l.smin * 3 / 4;
    l.stride_lat = l.lmin * 3 / 4;
  }
  l.blend_px = l.smin - l.stride_px;
  l.blend_lat = l.lmin - l.stride_lat;
  // Upstream derives the blended style's blends from the overlap factor directly.
  if (!l.masks && o.sample_stride == 0) {
    l.blend_px = l.smin / 4;
    l.blend_lat = l.lmin / 4;
  }
  if (l.lmin < 1 || l.stride_lat < 1 || l.stride_px < 1 || l.blend_lat < 0 ||
      o.sample_stride > l.smin)
    return Error("tile min " + std::to_string(l.smin) + " px and stride " +
                 std::to_string(o.sample_stride) +
                 " px do not give whole tiles for this model (latent ratio " +
                 std::to_string(l.ratio) + "); use a tile min of at least " +
                 std::to_string(2 * l.ratio) + " px and a stride no larger than it");
  l.decode_threshold_h = l.lmin;
  l.decode_threshold_w = threshold_from_stride ? l.stride_px / l.ratio : l.lmin;
  return l;
}

Expected<Tile> run_tile(GraphExecutor& s, const Graph& g, const Weights& w, const Tensor& x,
                        int64_t y, int64_t xo, int64_t size, const std::string& out, DType* dtype) {
  const int64_t h = std::min(size, x.dim(2) - y), wd = std::min(size, x.dim(3) - xo);
  const Tensor& f = x;  // converted to f32 once per stage
  Tensor tile = Tensor::uninitialized(DType::kF32, {x.dim(0), x.dim(1), h, wd});
  for (int64_t n = 0; n < x.dim(0) * x.dim(1); ++n)
    for (int64_t r = 0; r < h; ++r)
      std::memcpy(tile.data<float>() + (n * h + r) * wd,
                  f.data<float>() + (n * x.dim(2) + y + r) * x.dim(3) + xo,
                  std::size_t(wd) * sizeof(float));
  TP_ASSIGN_OR_RETURN(NamedTensors o, s.run(g, w, {{g.inputs[0].first, tile}}));
  const Tensor* t = find_tensor(o, out);
  *dtype = t->dtype();
  return to_tile(*t);
}

// Runs one tile through graph `g` and returns its output `out`.
std::function<Expected<Tensor>(const Tensor&)> graph_tile(GraphExecutor& s, const Graph& g,
                                                          const Weights& w, std::string out) {
  return [&s, g, &w, out](const Tensor& tile) -> Expected<Tensor> {
    TP_ASSIGN_OR_RETURN(NamedTensors o, s.run(g, w, {{g.inputs[0].first, tile}}));
    return *find_tensor(o, out);
  };
}

// AutoencoderTiny: mask blending into a zeroed fp32 output.
Expected<Tensor> masked_tiles(GraphExecutor& s, const Graph& g, const Weights& w, const Tensor& x,
                              const std::string& out_name, int64_t channels, int64_t size,
                              int64_t stride, int64_t blend, int64_t ratio, bool up,
                              int64_t* rows_out, int64_t* cols_out) {
  auto scale = [&](int64_t v) { return up ? v * ratio : v / ratio; };
  Tensor out(DType::kF32, {x.dim(0), channels, scale(x.dim(2)), scale(x.dim(3))});
  const float div = up ? float(blend * ratio - 1) : float(double(blend) / double(ratio) - 1);
  DType dt = DType::kF32;
  *rows_out = *cols_out = 0;
  for (int64_t i = 0; i < x.dim(2); i += stride, ++*rows_out) {
    *cols_out = 0;
    for (int64_t j = 0; j < x.dim(3); j += stride, ++*cols_out) {
      TP_ASSIGN_OR_RETURN(Tile t, run_tile(s, g, w, x, i, j, size, out_name, &dt));
      const int64_t oy = scale(i), ox = scale(j);
      const int64_t h = std::min(t.h, out.dim(2) - oy), wd = std::min(t.w, out.dim(3) - ox);
      for (int64_t n = 0; n < t.b * t.c; ++n)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t q = 0; q < wd; ++q) {
            const float my = i == 0 ? 1.0f : std::clamp(float(y) / div, 0.0f, 1.0f);
            const float mx = j == 0 ? 1.0f : std::clamp(float(q) / div, 0.0f, 1.0f);
            const float m = my * mx;
            float& o = out.data<float>()[(n * out.dim(2) + oy + y) * out.dim(3) + ox + q];
            o = m * t.at(n, y, q) + (1.0f - m) * o;
          }
    }
  }
  return out;
}

Expected<NamedTensors> tiled_stage(GraphExecutor& s, const Model& m, Pipeline stage,
                                   const Tensor& input, const Layout& l) {
  const VaeConfig& c = vae_config(m);
  const Tensor x = input.to(DType::kF32);
  const bool dec = stage == Pipeline::kDecode;
  const bool engage =
      l.masks || (dec ? (x.dim(2) > l.decode_threshold_h || x.dim(3) > l.decode_threshold_w)
                      : (x.dim(2) > l.smin || x.dim(3) > l.smin));
  TilingDecision decision{dec,
                          x.shape(),
                          engage,
                          0,
                          0,
                          dec ? l.lmin : l.smin,
                          dec ? l.stride_lat : l.stride_px,
                          dec ? l.decode_threshold_w : l.smin};
  if (!engage) {
    s.record_tiling(decision);
    const Graph g = dec ? build_decoder_graph(c) : build_encoder_graph(c);
    return s.run(g, m.weights, {{g.inputs[0].first, x}});
  }
  int64_t rows = 0, cols = 0;
  NamedTensors result;
  const int64_t size = dec ? l.lmin : l.smin, stride = dec ? l.stride_lat : l.stride_px;
  if (l.masks) {
    TP_ASSIGN_OR_RETURN(
        Tensor t,
        masked_tiles(s, dec ? build_decoder_graph(c) : build_encoder_graph(c), m.weights, x,
                     dec ? "sample" : "latents", dec ? c.image_channels() : c.latent_channels(),
                     size, stride, dec ? l.blend_lat : l.blend_px, l.ratio, dec, &rows, &cols));
    result = {{dec ? "sample" : "latents", t}};
  } else if (dec) {
    TP_ASSIGN_OR_RETURN(
        Tensor t,
        stream_blended_tiles(x, graph_tile(s, build_decoder_graph(c), m.weights, "sample"),
                             {size, stride, l.blend_px, l.smin - l.blend_px}, &rows, &cols));
    result = {{"sample", t}};
  } else {
    TP_ASSIGN_OR_RETURN(
        Tensor moments,
        stream_blended_tiles(x, graph_tile(s, c.moments_graph(), m.weights, "moments"),
                             {size, stride, l.blend_lat, l.lmin - l.blend_lat}, &rows, &cols));
    // The posterior's chunk and clamp after blending, in fp32, rounded to the moments' dtype.
    const int64_t b = moments.dim(0), lc = c.latent_channels(),
                  per = lc * moments.dim(2) * moments.dim(3);
    const Tensor f = moments.to(DType::kF32);
    std::vector<float> mean(std::size_t(b * per)), logvar(std::size_t(b * per));
    for (int64_t n = 0; n < b; ++n)
      for (int64_t k = 0; k < per; ++k) {
        mean[std::size_t(n * per + k)] = f.data<float>()[(2 * n) * per + k];
        logvar[std::size_t(n * per + k)] =
            std::min(std::max(f.data<float>()[(2 * n + 1) * per + k], -30.0f), 20.0f);
      }
    Tensor mu = Tensor::uninitialized(moments.dtype(), {b, lc, moments.dim(2), moments.dim(3)}),
           lv = Tensor::uninitialized(moments.dtype(), mu.shape());
    store_rounded(mean.data(), b * per, mu.dtype(), mu.raw());
    store_rounded(logvar.data(), b * per, lv.dtype(), lv.raw());
    result = {{"mean", mu}, {"logvar", lv}};
  }
  decision.rows = rows;
  decision.cols = cols;
  s.record_tiling(decision);
  return result;
}

}  // namespace

Expected<NamedTensors> run_streamed_tiled(const Model& m, Pipeline p, const Tensor& input,
                                          GraphExecutor& s, const TilingOptions& o) {
  TP_RETURN_IF_ERROR(check_pipeline_input(m, p, input));
  TP_ASSIGN_OR_RETURN(Layout l,
                      layout_for(vae_config(m), o, s.injects("tile-threshold-from-stride")));
  if (p != Pipeline::kRoundtrip) return tiled_stage(s, m, p, input, l);
  TP_ASSIGN_OR_RETURN(NamedTensors enc, tiled_stage(s, m, Pipeline::kEncode, input, l));
  TP_ASSIGN_OR_RETURN(NamedTensors dec, tiled_stage(s, m, Pipeline::kDecode, enc[0].second, l));
  return NamedTensors{dec[0]};
}

}  // namespace tp
