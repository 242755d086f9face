// The VAE families' tiling hooks (Family::check_tiling_decision, seam_bands, tiling_points,
// tile_share), from the one TileGeometry the tilers use (tiling.h).
#include <algorithm>
#include <set>

#include "harness/models/vae/tiling.h"
#include "harness/models/vae/vae_family.h"

namespace tp {

std::string VaeFamily::check_tiling_decision(const ModelConfig& config,
                                             const TilingOptions& options,
                                             const TilingDecision& d) const {
  auto g = tile_geometry(dynamic_cast<const VaeConfig&>(config), options);
  if (!g.ok()) return g.error().message();
  const bool rule = tiling_engages(*g, d.decode ? Pipeline::kDecode : Pipeline::kEncode, d.input);
  if (d.engaged == rule) return "";
  const int64_t limit = d.decode ? g->latent_min : g->sample_min;
  return "the compiled path " + std::string(d.engaged ? "tiled" : "did not tile") + " the " +
         (d.decode ? "decode" : "encode") + " input " + shape_string(d.input) +
         ", but the config's rule (tile only above the " + std::to_string(limit) +
         (d.decode ? " latent" : " px") + " tile min in height or width) says it " +
         (rule ? "must tile" : "fits one tile") + " (" + d.text() + ")";
}

Expected<SeamBands> VaeFamily::seam_bands(const ModelConfig& config, const TilingOptions& options,
                                          const std::string& pipeline, const Shape& input) const {
  TP_ASSIGN_OR_RETURN(TileGeometry g,
                      tile_geometry(dynamic_cast<const VaeConfig&>(config), options));
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  return tp::seam_bands(g, p, input);
}

// Around each engage threshold (the tile min: KL tiles an input that exceeds it): one latent
// pixel under, at and over it, and the stride boundaries where the tile count changes (S, S +
// one latent pixel, 2S, 2S + one); each along the height with the width at the threshold, and
// along the width with the height at it, for the encode and decode thresholds (a roundtrip
// takes both).
Expected<std::vector<std::pair<int64_t, int64_t>>> VaeFamily::tiling_points(
    const ModelConfig& config, const std::string& pipeline, const TilingOptions& options) const {
  const auto& c = dynamic_cast<const VaeConfig&>(config);
  TP_ASSIGN_OR_RETURN(TileGeometry g, tile_geometry(c, options));
  TP_ASSIGN_OR_RETURN(Pipeline p, parse_pipeline(pipeline));
  const int64_t q = c.downscale();                      // one latent pixel, in image pixels
  std::vector<std::pair<int64_t, int64_t>> thresholds;  // (threshold, stride) in pixels, per stage
  if (p != Pipeline::kDecode) thresholds.emplace_back(g.sample_min, g.encode_stride);
  if (p != Pipeline::kEncode) thresholds.emplace_back(g.latent_min * q, g.decode_stride * q);
  return points_around_thresholds(thresholds, q);
}

std::vector<std::pair<int64_t, int64_t>> points_around_thresholds(
    const std::vector<std::pair<int64_t, int64_t>>& thresholds, int64_t q) {
  std::set<std::pair<int64_t, int64_t>> out;
  for (const auto& [t, s] : thresholds) {
    for (int64_t size : {t - q, t, t + q, s, s + q, 2 * s, 2 * s + q}) {
      size = size / q * q;  // whole latent pixels
      if (size < q) continue;
      out.emplace(size, t);
      out.emplace(t, size);
    }
  }
  return std::vector<std::pair<int64_t, int64_t>>(out.begin(), out.end());
}

// A tile's pixels over the image's (the compiled path runs one tile at a time).
double VaeFamily::tile_share(const ModelConfig& config, const TilingOptions& options,
                             int64_t height, int64_t width) const {
  auto g = tile_geometry(dynamic_cast<const VaeConfig&>(config), options);
  if (!g.ok() || !options.enabled) return 1;
  const double image = double(height) * double(width);
  return std::min(1.0, double(g->sample_min) * double(g->sample_min) / image);
}

// Per axis, a pixel lies in at most ceil(tile / stride) tiles (no more than the axis has), the
// encode and decode grids taken at their larger.
double VaeFamily::tile_coverage(const ModelConfig& config, const TilingOptions& options,
                                int64_t height, int64_t width) const {
  auto g = tile_geometry(dynamic_cast<const VaeConfig&>(config), options);
  if (!g.ok() || !options.enabled) return 1;
  const int64_t stride =
      std::max<int64_t>(1, std::min(g->encode_stride, g->decode_stride * g->ratio));
  auto per_axis = [&](int64_t pixels) {
    const int64_t tiles_over_pixel = (g->sample_min + stride - 1) / stride;
    return double(std::max<int64_t>(1, std::min(tiles_over_pixel, (pixels + stride - 1) / stride)));
  };
  return per_axis(height) * per_axis(width);
}

}  // namespace tp
