// The compiled path's tiler for AutoencoderKLHunyuanVideo, written apart from the plain one
// (hv_plain_tiling.cpp): temporal tiles stream one after the other into the output (only the
// previous tile's frames are kept for blend_t), each tiled in space by the shared streamed
// blender (vae/streamed_blend.h) when it engages, so a call's activation memory is one tile's
// (the session keeps each tile shape's plan and arena for its next call: mem= evicts them).
// Blends compute in fp32 and round once to the activation dtype. Each stage records its decision
// (in time and in space, with the grid) for the tiling check, and tile-threshold-from-stride
// reproduces diffusers' pre-fix _decode (the width threshold from the stride: field report 4).
#include <algorithm>

#include "harness/models/autoencoder_kl_hunyuan_video/hv_tiling.h"
#include "harness/models/vae/streamed_blend.h"

namespace tp {
namespace {

class StreamedTiler {
 public:
  StreamedTiler(const Model& m, GraphExecutor& e, const HvTiles& t, bool threshold_from_stride)
      : m_(m), c_(dynamic_cast<const HunyuanVideoVaeConfig&>(*m.config)), e_(e), t_(t) {
    // _decode's latent thresholds: min // ratio, or (the fault) the width's from the stride.
    decode_h_ = t.min_px / t.ratio;
    decode_w_ = (threshold_from_stride ? t.stride_px : t.min_px) / t.ratio;
  }

  bool time(HvStage s, const Shape& x) const {
    return t_.framewise &&
           x[2] > (s == HvStage::kEncode ? t_.min_frames : t_.min_frames / t_.frames_ratio);
  }
  bool space(HvStage s, const Shape& x) const {
    if (s == HvStage::kEncode) return t_.spatial && (x[4] > t_.min_px || x[3] > t_.min_px);
    return t_.spatial && (x[4] > decode_w_ || x[3] > decode_h_);
  }

  // What this tiler does with a stage's input (the grid filled in as it runs).
  TilingDecision decision(HvStage s, const Shape& x) const {
    TilingDecision d;
    d.decode = s == HvStage::kDecode;
    d.input = x;
    d.framewise = time(s, x);
    d.engaged = space(s, x);
    d.tile = d.decode ? t_.min_px / t_.ratio : t_.min_px;
    d.stride = d.decode ? t_.stride_px / t_.ratio : t_.stride_px;
    d.threshold = d.decode ? decode_w_ : t_.min_px;
    d.frame_threshold = d.decode ? t_.min_frames / t_.frames_ratio : t_.min_frames;
    return d;
  }

  // The stage's output (moments or video) in the activation dtype; its decision recorded.
  Expected<Tensor> stage(HvStage s, const Tensor& x) {
    TilingDecision d = decision(s, x.shape());
    auto out = d.framewise ? frames(s, x, d) : d.engaged ? tiles(s, x, d) : whole(s, x);
    e_.record_tiling(d);
    return out;
  }

 private:
  Expected<Tensor> whole(HvStage s, const Tensor& x) { return run_hv_stage_whole(m_, e_, s, x); }

  // In space: blended tiles over height and width, kept parts' sum cropped to the output size.
  Expected<Tensor> tiles(HvStage s, const Tensor& x, TilingDecision& d) {
    const bool enc = s == HvStage::kEncode;
    const int64_t r = t_.ratio;
    BlendedGrid grid;
    grid.size = enc ? t_.min_px : t_.min_px / r;
    grid.stride = enc ? t_.stride_px : t_.stride_px / r;
    grid.blend = enc ? t_.min_px / r - t_.stride_px / r : t_.min_px - t_.stride_px;
    grid.keep = enc ? t_.stride_px / r : t_.stride_px;
    int64_t rows = 0, cols = 0;
    TP_ASSIGN_OR_RETURN(
        Tensor out, stream_blended_tiles(
                        x.to(DType::kF32), [&](const Tensor& tile) { return whole(s, tile); }, grid,
                        &rows, &cols));
    if (d.rows == 0) d.rows = rows, d.cols = cols;
    const int64_t h = enc ? x.dim(3) / r : x.dim(3) * r, w = enc ? x.dim(4) / r : x.dim(4) * r;
    if (out.dim(3) == h && out.dim(4) == w) return out;
    return crop_space(out, h, w);
  }

  static Tensor crop_space(const Tensor& t, int64_t h, int64_t w) {
    const Tensor f = t.to(DType::kF32);
    const int64_t planes = f.dim(0) * f.dim(1) * f.dim(2), H = f.dim(3), W = f.dim(4);
    h = std::min(h, H);
    w = std::min(w, W);
    Tensor out = Tensor::uninitialized(DType::kF32, {f.dim(0), f.dim(1), f.dim(2), h, w});
    for (int64_t n = 0; n < planes; ++n)
      for (int64_t y = 0; y < h; ++y)
        std::copy_n(f.data<float>() + (n * H + y) * W, w, out.data<float>() + (n * h + y) * w);
    return out.to(t.dtype());
  }

  // In time: tile k reads the stage's frames [k*step, k*step + tile), drops its first output
  // frame after the first tile, blends its first frames with the previous tile's last ones, and
  // writes the kept frames where the previous tile's ended.
  Expected<Tensor> frames(HvStage s, const Tensor& x, TilingDecision& d) {
    const bool enc = s == HvStage::kEncode;
    const int64_t blend = enc ? t_.min_frames / t_.frames_ratio - t_.stride_frames / t_.frames_ratio
                              : t_.min_frames - t_.stride_frames;
    const int64_t keep = enc ? t_.stride_frames / t_.frames_ratio : t_.stride_frames;
    const int64_t total = enc ? c_.latent_frames(x.dim(2)) : c_.video_frames(x.dim(2));
    const Tensor f = x.to(DType::kF32);
    std::vector<float> prev, result;  // [B*C][frames][H*W]
    int64_t planes = 0, area = 0, prev_frames = 0, written = 0;
    Shape out_shape;
    DType dt = DType::kF32;
    for (int64_t i = 0, k = 0; i < x.dim(2); i += t_.time_step(s), ++k) {
      const Tensor tile = frame_window(f, i, t_.time_tile(s));
      TP_ASSIGN_OR_RETURN(Tensor out, space(s, tile.shape()) ? tiles(s, tile, d) : whole(s, tile));
      dt = out.dtype();
      if (k == 0) {
        planes = out.dim(0) * out.dim(1);
        area = out.dim(3) * out.dim(4);
        out_shape = {out.dim(0), out.dim(1), total, out.dim(3), out.dim(4)};
        result.assign(std::size_t(planes * total * area), 0.0f);
      }
      const Tensor o = out.to(DType::kF32);
      const int64_t drop = k > 0 ? 1 : 0, n = out.dim(2) - drop;
      std::vector<float> cur(std::size_t(planes * n * area));
      for (int64_t p = 0; p < planes; ++p)
        std::copy_n(o.data<float>() + (p * out.dim(2) + drop) * area, n * area,
                    cur.data() + p * n * area);
      const int64_t e = k > 0 ? std::min({prev_frames, n, blend}) : 0;
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t y = 0; y < e; ++y)
          for (int64_t a = 0; a < area; ++a) {
            float& v = cur[std::size_t((p * n + y) * area + a)];
            const float from =
                prev[std::size_t((p * prev_frames + prev_frames - e + y) * area + a)];
            v = float(round_through(
                dt, from * float(1 - double(y) / double(e)) + v * float(double(y) / double(e))));
          }
      const int64_t kept = std::min({n, keep + (k == 0 ? 1 : 0), total - written});
      for (int64_t p = 0; p < planes; ++p)
        std::copy_n(cur.data() + p * n * area, std::max<int64_t>(kept, 0) * area,
                    result.data() + (p * total + written) * area);
      written += std::max<int64_t>(kept, 0);
      prev.swap(cur);
      prev_frames = n;
      ++d.frame_tiles;
    }
    Tensor out = Tensor::uninitialized(dt, out_shape);
    convert_elements(result.data(), DType::kF32, out.raw(), dt, result.size());
    return out;
  }

  // x[:, :, i:i+len] (clipped).
  static Tensor frame_window(const Tensor& f, int64_t i, int64_t len) {
    len = std::min(len, f.dim(2) - i);
    const int64_t planes = f.dim(0) * f.dim(1), area = f.dim(3) * f.dim(4);
    Tensor out = Tensor::uninitialized(DType::kF32, {f.dim(0), f.dim(1), len, f.dim(3), f.dim(4)});
    for (int64_t p = 0; p < planes; ++p)
      std::copy_n(f.data<float>() + (p * f.dim(2) + i) * area, len * area,
                  out.data<float>() + p * len * area);
    return out;
  }

  const Model& m_;
  const HunyuanVideoVaeConfig& c_;
  GraphExecutor& e_;
  const HvTiles& t_;
  int64_t decode_h_ = 0, decode_w_ = 0;
};

// The posterior of blended moments in fp32, rounded to their dtype.
NamedTensors posterior(const Tensor& moments, int64_t l) {
  const Tensor f = moments.to(DType::kF32);
  const int64_t b = f.dim(0), per = f.numel() / (b * 2 * l) * l;
  Shape s = f.shape();
  s[1] = l;
  Tensor mean = Tensor::uninitialized(DType::kF32, s);
  Tensor logvar = Tensor::uninitialized(DType::kF32, s);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t i = 0; i < per; ++i) {
      mean.data<float>()[n * per + i] = f.data<float>()[2 * n * per + i];
      logvar.data<float>()[n * per + i] =
          std::min(std::max(f.data<float>()[(2 * n + 1) * per + i], -30.0f), 20.0f);
    }
  return {{"mean", mean.to(moments.dtype())}, {"logvar", logvar.to(moments.dtype())}};
}

}  // namespace

Expected<NamedTensors> run_hv_streamed_tiled(const Model& m, HvStage first, bool roundtrip,
                                             const Tensor& input, GraphExecutor& e,
                                             const TilingOptions& options, bool stage_outputs) {
  const auto& c = dynamic_cast<const HunyuanVideoVaeConfig&>(*m.config);
  TP_ASSIGN_OR_RETURN(HvTiles t, hv_tiles(c, options));
  StreamedTiler tiler(m, e, t, e.injects("tile-threshold-from-stride"));
  const Tensor x = input.to(DType::kF32);
  const Shape z{x.dim(0), c.latent_channels, c.latent_frames(x.dim(2)),
                x.dim(3) / c.spatial_compression_ratio, x.dim(4) / c.spatial_compression_ratio};
  const bool encodes = first == HvStage::kEncode, decodes = first == HvStage::kDecode || roundtrip;
  const bool tiles_encode = encodes && (tiler.time(HvStage::kEncode, x.shape()) ||
                                        tiler.space(HvStage::kEncode, x.shape()));
  const Shape& latents = encodes ? z : x.shape();
  const bool tiles_decode =
      decodes && (tiler.time(HvStage::kDecode, latents) || tiler.space(HvStage::kDecode, latents));
  if (!tiles_encode && !tiles_decode) {  // the whole graphs, their decisions recorded
    if (encodes) e.record_tiling(tiler.decision(HvStage::kEncode, x.shape()));
    if (decodes) e.record_tiling(tiler.decision(HvStage::kDecode, latents));
    return run_hv_whole(m, first, roundtrip, x, e, stage_outputs);
  }
  return run_hv_stages(
      first, roundtrip, x, [&](HvStage s, const Tensor& in) { return tiler.stage(s, in); },
      [&](const Tensor& moments) { return posterior(moments, c.latent_channels); }, stage_outputs);
}

}  // namespace tp
