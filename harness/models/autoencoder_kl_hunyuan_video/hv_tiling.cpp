// HvTiles: diffusers' sizes and engage rule (autoencoder_kl_hunyuan_video.py _encode L764-775,
// _decode L805-815, enable_tiling L724-762), the blend bands they make, and the untiled run.
#include "harness/models/autoencoder_kl_hunyuan_video/hv_tiling.h"

#include <algorithm>
#include <functional>

namespace tp {

bool HvTiles::in_time(HvStage stage, const Shape& x) const {
  return framewise && x[2] > (stage == HvStage::kEncode ? min_frames : latent_min_frames());
}

bool HvTiles::in_space(HvStage stage, const Shape& x) const {
  const int64_t limit = stage == HvStage::kEncode ? min_px : latent_min();
  return spatial && (x[4] > limit || x[3] > limit);
}

int64_t HvTiles::time_tile(HvStage stage) const {
  return (stage == HvStage::kEncode ? min_frames : latent_min_frames()) + 1;
}

int64_t HvTiles::time_step(HvStage stage) const {
  return stage == HvStage::kEncode ? stride_frames : latent_stride_frames();
}

Expected<HvTiles> hv_tiles(const HunyuanVideoVaeConfig& c, const TilingOptions& o) {
  HvTiles t;
  t.spatial = o.enabled;
  t.framewise = o.framewise;
  t.ratio = c.spatial_compression_ratio;
  t.frames_ratio = c.temporal_compression_ratio;
  // enable_tiling's `x or default`: zero keeps the default.
  if (o.sample_min) t.min_px = o.sample_min;
  if (o.sample_stride) t.stride_px = o.sample_stride;
  if (o.frames_min) t.min_frames = o.frames_min;
  if (o.frames_stride) t.stride_frames = o.frames_stride;
  // What is wrong with a min:stride pair along an axis compressed q times ("" if nothing).
  auto wrong = [](int64_t min, int64_t stride, int64_t q, const std::string& unit,
                  const std::string& what, const char* fallback) -> std::string {
    if (min % q == 0 && stride % q == 0 && stride >= q && stride <= min) return "";
    return what + " " + std::to_string(min) + ":" + std::to_string(stride) + " " + unit +
           " does not step whole latents (this VAE compresses " + std::to_string(q) +
           "x); give a min and a stride that are multiples of " + std::to_string(q) +
           ", the stride at least " + std::to_string(q) + " and no larger than the min " +
           "(diffusers' default is " + fallback + ")";
  };
  if (o.enabled || o.sample_min || o.sample_stride)
    if (std::string why = wrong(t.min_px, t.stride_px, t.ratio, "px", "tile", "256:192");
        !why.empty())
      return Error(why);
  if (o.framewise)
    if (std::string why =
            wrong(t.min_frames, t.stride_frames, t.frames_ratio, "frames", "tile_frames", "16:12");
        !why.empty())
      return Error(why);
  return t;
}

namespace {

// Blend bands along one axis of a stage's output: tiles read `size` input elements every `step`;
// a tile of n input elements gives `out(n, k)` outputs, blends its first min(previous, own,
// `blend`) with the previous tile, keeps `keep(k)`; the output is cropped to `total`.
std::vector<bool> axis_bands(bool engaged, int64_t n, int64_t size, int64_t step,
                             const std::function<int64_t(int64_t, int64_t)>& out, int64_t blend,
                             const std::function<int64_t(int64_t)>& keep, int64_t total) {
  std::vector<bool> bands(std::size_t(std::max<int64_t>(total, 0)), false);
  if (!engaged) return bands;
  int64_t start = 0, previous = 0;
  for (int64_t i = 0, k = 0; i < n; i += step, ++k) {
    const int64_t len = out(std::min(size, n - i), k);
    if (k > 0)
      for (int64_t y = start; y < std::min(start + std::min({previous, len, blend}), total); ++y)
        bands[std::size_t(y)] = true;
    start += std::min(keep(k), len);
    previous = len;
  }
  return bands;
}

SeamBands stage_bands(const HvTiles& t, const HunyuanVideoVaeConfig& c, HvStage stage,
                      const Shape& x) {
  const bool enc = stage == HvStage::kEncode;
  const int64_t r = t.ratio;
  SeamBands b;
  // Frames: a temporal tile's latents (encode) or video frames (decode), less the first after
  // the first tile; the first tile keeps one more.
  auto frames_out = [&](int64_t n, int64_t k) {
    return (enc ? c.latent_frames(n) : c.video_frames(n)) - (k > 0 ? 1 : 0);
  };
  const int64_t keep_frames = enc ? t.latent_stride_frames() : t.stride_frames;
  const int64_t blend_frames =
      enc ? t.latent_min_frames() - t.latent_stride_frames() : t.min_frames - t.stride_frames;
  b.frames = axis_bands(
      t.in_time(stage, x), x[2], t.time_tile(stage), t.time_step(stage), frames_out, blend_frames,
      [&](int64_t k) { return keep_frames + (k == 0 ? 1 : 0); },
      enc ? c.latent_frames(x[2]) : c.video_frames(x[2]));
  const bool space = t.in_space(stage, x);
  const int64_t size = enc ? t.min_px : t.latent_min(),
                step = enc ? t.stride_px : t.latent_stride();
  const int64_t blend = enc ? t.latent_min() - t.latent_stride() : t.min_px - t.stride_px;
  const int64_t keep = enc ? t.latent_stride() : t.stride_px;
  auto px_out = [&](int64_t n, int64_t) { return enc ? n / r : n * r; };
  for (int axis : {3, 4}) {
    const int64_t total = enc ? x[std::size_t(axis)] / r : x[std::size_t(axis)] * r;
    (axis == 3 ? b.rows : b.cols) = axis_bands(
        space, x[std::size_t(axis)], size, step, px_out, blend, [&](int64_t) { return keep; },
        total);
  }
  return b;
}

// A band of the encode's latents covers every sample element it decodes to.
std::vector<bool> widen(const std::vector<bool>& latent, std::vector<bool> out,
                        const std::function<int64_t(int64_t)>& latent_of) {
  for (std::size_t y = 0; y < out.size(); ++y) {
    const int64_t l = latent_of(int64_t(y));
    if (l < int64_t(latent.size()) && latent[std::size_t(l)]) out[y] = true;
  }
  return out;
}

}  // namespace

SeamBands hv_seam_bands(const HvTiles& t, const HunyuanVideoVaeConfig& c, bool encode, bool decode,
                        const Shape& x) {
  if (!encode) return stage_bands(t, c, HvStage::kDecode, x);
  const SeamBands e = stage_bands(t, c, HvStage::kEncode, x);
  if (!decode) return e;
  const Shape z{x[0], c.latent_channels, c.latent_frames(x[2]), x[3] / t.ratio, x[4] / t.ratio};
  SeamBands d = stage_bands(t, c, HvStage::kDecode, z);
  const int64_t r = t.ratio, f = t.frames_ratio;
  d.rows = widen(e.rows, d.rows, [r](int64_t y) { return y / r; });
  d.cols = widen(e.cols, d.cols, [r](int64_t x) { return x / r; });
  d.frames = widen(e.frames, d.frames, [f](int64_t k) { return k == 0 ? 0 : (k - 1) / f + 1; });
  return d;
}

Expected<Tensor> run_hv_stage_whole(const Model& m, GraphExecutor& executor, HvStage s,
                                    const Tensor& x) {
  const auto& c = dynamic_cast<const HunyuanVideoVaeConfig&>(*m.config);
  const bool enc = s == HvStage::kEncode;
  const Graph g = enc ? build_hunyuan_video_moments_graph(c) : build_hunyuan_video_decoder_graph(c);
  TP_ASSIGN_OR_RETURN(NamedTensors o, executor.run(g, m.weights, {{g.inputs[0].first, x}}));
  return *find_tensor(o, enc ? "moments" : "sample");
}

Expected<NamedTensors> run_hv_stages(HvStage first, bool roundtrip, const Tensor& x,
                                     const HvStageRunner& stage,
                                     const std::function<NamedTensors(const Tensor&)>& posterior,
                                     bool stage_outputs) {
  if (first == HvStage::kDecode) {
    TP_ASSIGN_OR_RETURN(Tensor video, stage(HvStage::kDecode, x));
    return NamedTensors{{"sample", video}};
  }
  TP_ASSIGN_OR_RETURN(Tensor moments, stage(HvStage::kEncode, x));
  NamedTensors post = posterior(moments);
  if (!roundtrip) return post;
  TP_ASSIGN_OR_RETURN(Tensor video, stage(HvStage::kDecode, post[0].second));
  NamedTensors out{{"sample", video}};
  if (stage_outputs)
    for (const auto& [name, t] : post) out.emplace_back("encoder." + name, t);
  return out;
}

Expected<NamedTensors> run_hv_whole(const Model& m, HvStage first, bool roundtrip, const Tensor& x,
                                    GraphExecutor& executor, bool stage_outputs) {
  const auto& c = dynamic_cast<const HunyuanVideoVaeConfig&>(*m.config);
  if (first == HvStage::kDecode)
    return executor.run(build_hunyuan_video_decoder_graph(c), m.weights, {{"latents", x}});
  const Graph encoder = build_hunyuan_video_encoder_graph(c);
  TP_ASSIGN_OR_RETURN(NamedTensors posterior, executor.run(encoder, m.weights, {{"sample", x}}));
  if (!roundtrip) return posterior;
  TP_ASSIGN_OR_RETURN(NamedTensors out,
                      executor.run(build_hunyuan_video_decoder_graph(c), m.weights,
                                   {{"latents", *find_tensor(posterior, "mean")}}));
  if (stage_outputs)
    for (const auto& [name, t] : posterior) out.emplace_back("encoder." + name, t);
  return out;
}

}  // namespace tp
