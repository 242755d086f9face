// The reference paths' tiler: AutoencoderKLHunyuanVideo's tiled_encode, tiled_decode,
// _temporal_tiled_encode, _temporal_tiled_decode and blend_v / blend_h / blend_t
// (autoencoder_kl_hunyuan_video.py L851-1048) as written: every tile kept, blended in place in
// upstream's order, cropped and concatenated, in double (diffusers' float64 run).
#include <algorithm>

#include "harness/models/autoencoder_kl_hunyuan_video/hv_tiling.h"

namespace tp {
namespace {

// A tensor seen as [outer, n, inner] around `axis`.
struct Around {
  int64_t outer = 1, n = 0, inner = 1;
  Around(const Tensor& t, int axis) : n(t.dim(axis)) {
    for (int i = 0; i < axis; ++i) outer *= t.dim(i);
    for (int i = axis + 1; i < t.rank(); ++i) inner *= t.dim(i);
  }
};

// t[..., start:start+len, ...] along `axis` (clipped: Python's slice), in double.
Tensor narrow(const Tensor& t, int axis, int64_t start, int64_t len) {
  const Tensor f = t.to(DType::kF64);
  const Around a(f, axis);
  start = std::min(start, a.n);
  len = std::max<int64_t>(0, std::min(len, a.n - start));
  Shape s = f.shape();
  s[std::size_t(axis)] = len;
  Tensor out(DType::kF64, s);
  for (int64_t o = 0; o < a.outer; ++o)
    std::copy_n(f.data<double>() + (o * a.n + start) * a.inner, len * a.inner,
                out.data<double>() + o * len * a.inner);
  return out;
}

// blend_v / blend_h / blend_t along `axis`: b's first e slices ramp from a's last e, in place.
void blend(const Tensor& a, Tensor& b, int axis, int64_t extent) {
  const Around pa(a, axis), pb(b, axis);
  const int64_t e = std::min({pa.n, pb.n, extent});
  for (int64_t o = 0; o < pb.outer; ++o)
    for (int64_t y = 0; y < e; ++y)
      for (int64_t i = 0; i < pb.inner; ++i) {
        double& v = b.data<double>()[(o * pb.n + y) * pb.inner + i];
        const double from = a.data<double>()[(o * pa.n + pa.n - e + y) * pa.inner + i];
        v = from * (1 - double(y) / double(e)) + v * (double(y) / double(e));
      }
}

// torch.cat along `axis`.
Tensor cat(const std::vector<Tensor>& parts, int axis) {
  Shape s = parts.front().shape();
  s[std::size_t(axis)] = 0;
  for (const Tensor& p : parts) s[std::size_t(axis)] += p.dim(axis);
  Tensor out(DType::kF64, s);
  const Around whole(out, axis);
  int64_t at = 0;
  for (const Tensor& p : parts) {
    const Around a(p, axis);
    for (int64_t o = 0; o < a.outer; ++o)
      std::copy_n(p.data<double>() + o * a.n * a.inner, a.n * a.inner,
                  out.data<double>() + (o * whole.n + at) * whole.inner);
    at += a.n;
  }
  return out;
}

class PlainTiler {
 public:
  PlainTiler(const Model& m, GraphExecutor& e, const HvTiles& t)
      : m_(m), c_(dynamic_cast<const HunyuanVideoVaeConfig&>(*m.config)), e_(e), t_(t) {}

  // The encoder's moments (encode) or the decoded video (decode) of `x`, tiled as upstream.
  Expected<Tensor> stage(HvStage s, const Tensor& x) {
    if (t_.in_time(s, x.shape())) return in_time(s, x);
    if (t_.in_space(s, x.shape())) return in_space(s, x);
    return whole(s, x);
  }

 private:
  Expected<Tensor> whole(HvStage s, const Tensor& x) {
    TP_ASSIGN_OR_RETURN(Tensor out, run_hv_stage_whole(m_, e_, s, x));
    return out.to(DType::kF64);
  }

  // tiled_encode / tiled_decode.
  Expected<Tensor> in_space(HvStage s, const Tensor& x) {
    const bool enc = s == HvStage::kEncode;
    const int64_t size = enc ? t_.min_px : t_.latent_min();
    const int64_t step = enc ? t_.stride_px : t_.latent_stride();
    const int64_t blend_extent =
        enc ? t_.latent_min() - t_.latent_stride() : t_.min_px - t_.stride_px;
    const int64_t keep = enc ? t_.latent_stride() : t_.stride_px;
    std::vector<std::vector<Tensor>> rows;
    for (int64_t i = 0; i < x.dim(3); i += step) {
      rows.emplace_back();
      for (int64_t j = 0; j < x.dim(4); j += step) {
        TP_ASSIGN_OR_RETURN(Tensor tile, whole(s, narrow(narrow(x, 3, i, size), 4, j, size)));
        rows.back().push_back(std::move(tile));
      }
    }
    std::vector<Tensor> result_rows;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<Tensor> row;
      for (std::size_t j = 0; j < rows[i].size(); ++j) {
        if (i > 0) blend(rows[i - 1][j], rows[i][j], 3, blend_extent);
        if (j > 0) blend(rows[i][j - 1], rows[i][j], 4, blend_extent);
        row.push_back(narrow(narrow(rows[i][j], 3, 0, keep), 4, 0, keep));
      }
      result_rows.push_back(cat(row, 4));
    }
    const int64_t h = enc ? x.dim(3) / t_.ratio : x.dim(3) * t_.ratio;
    const int64_t w = enc ? x.dim(4) / t_.ratio : x.dim(4) * t_.ratio;
    return narrow(narrow(cat(result_rows, 3), 3, 0, h), 4, 0, w);
  }

  // _temporal_tiled_encode / _temporal_tiled_decode.
  Expected<Tensor> in_time(HvStage s, const Tensor& x) {
    const bool enc = s == HvStage::kEncode;
    const int64_t blend_extent =
        enc ? t_.latent_min_frames() - t_.latent_stride_frames() : t_.min_frames - t_.stride_frames;
    const int64_t keep = enc ? t_.latent_stride_frames() : t_.stride_frames;
    std::vector<Tensor> row;
    for (int64_t i = 0; i < x.dim(2); i += t_.time_step(s)) {
      const Tensor tile = narrow(x, 2, i, t_.time_tile(s));
      // Upstream tests the whole video's size (encode) or the tile's (decode): the same sizes.
      TP_ASSIGN_OR_RETURN(Tensor out,
                          t_.in_space(s, tile.shape()) ? in_space(s, tile) : whole(s, tile));
      row.push_back(i > 0 ? narrow(out, 2, 1, out.dim(2)) : out);
    }
    std::vector<Tensor> result;
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) blend(row[i - 1], row[i], 2, blend_extent);
      result.push_back(narrow(row[i], 2, 0, keep + (i == 0 ? 1 : 0)));
    }
    const int64_t frames = enc ? c_.latent_frames(x.dim(2)) : c_.video_frames(x.dim(2));
    return narrow(cat(result, 2), 2, 0, frames);
  }

  const Model& m_;
  const HunyuanVideoVaeConfig& c_;
  GraphExecutor& e_;
  const HvTiles& t_;
};

// DiagonalGaussianDistribution on blended moments: chunk, clamp logvar to [-30, 20].
NamedTensors posterior(const Tensor& moments, int64_t latent_channels) {
  const int64_t l = latent_channels;
  Tensor mean = narrow(moments, 1, 0, l), logvar = narrow(moments, 1, l, l);
  for (int64_t i = 0; i < logvar.numel(); ++i)
    logvar.data<double>()[i] = std::clamp(logvar.data<double>()[i], -30.0, 20.0);
  return {{"mean", mean}, {"logvar", logvar}};
}

}  // namespace

Expected<NamedTensors> run_hv_plain_tiled(const Model& m, HvStage first, bool roundtrip,
                                          const Tensor& input, GraphExecutor& executor,
                                          const HvTiles& tiles, bool stage_outputs) {
  const auto& c = dynamic_cast<const HunyuanVideoVaeConfig&>(*m.config);
  PlainTiler tiler(m, executor, tiles);
  return run_hv_stages(
      first, roundtrip, input.to(DType::kF64),
      [&](HvStage s, const Tensor& x) { return tiler.stage(s, x); },
      [&](const Tensor& moments) { return posterior(moments, c.latent_channels); }, stage_outputs);
}

}  // namespace tp
