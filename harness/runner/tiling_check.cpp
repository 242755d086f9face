// Tiled cases: the compiled path's engage decision against the rule computed from the config
// (field report 4: a threshold taken from the stride tiles inputs that fit one tile), and the
// tiled output against the untiled reference with the blend bands measured apart from the tile
// interiors: seams are where tiling changes the picture, so they are reported, not judged.
#include "harness/models/vae/tiling.h"
#include "harness/runner/runs.h"

namespace tp {
namespace {

// The elements of `t` (NCHW) inside (or outside) the seam bands, as one row.
Tensor gather(const Tensor& t, const SeamBands& bands, bool seams) {
  const Tensor f = t.to(DType::kF64);
  const int64_t planes = f.dim(0) * f.dim(1), h = f.dim(2), w = f.dim(3);
  std::vector<double> picked;
  for (int64_t n = 0; n < planes; ++n)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        if (bands.at(y, x) == seams) picked.push_back(f.data<double>()[(n * h + y) * w + x]);
  Tensor out(DType::kF64, {int64_t(picked.size())});
  std::copy(picked.begin(), picked.end(), out.data<double>());
  return out;
}

std::string stage_name(bool decode) { return decode ? "decode" : "encode"; }

}  // namespace

TilingCheck check_tiling(const PreparedCase& p, const CompiledRun& run) {
  TilingCheck check;
  // Tiling rules are the VAE families' (prepare_case refuses tiling=on on a family without).
  const auto* vae = dynamic_cast<const VaeConfig*>(p.model->config.get());
  auto pipeline = parse_pipeline(p.pipeline);
  if (!vae || !pipeline.ok()) {
    check.failure = "tiling: " + p.model->family().class_name() + " has no tiling rule";
    return check;
  }
  auto geometry = tile_geometry(*vae, p.tiling);
  if (!geometry.ok()) {
    check.failure = geometry.error().message();
    return check;
  }
  // The case's own stages are the session's last decisions (a warm= model ran first).
  const std::vector<TilingDecision>& all = run.session->tiling();
  const std::size_t stages = *pipeline == Pipeline::kRoundtrip ? 2 : 1;
  for (std::size_t i = all.size() < stages ? 0 : all.size() - stages; i < all.size(); ++i) {
    const TilingDecision& d = all[i];
    const bool rule =
        tiling_engages(*geometry, d.decode ? Pipeline::kDecode : Pipeline::kEncode, d.input);
    if (d.engaged == rule || !check.failure.empty()) continue;
    const int64_t limit = d.decode ? geometry->latent_min : geometry->sample_min;
    check.failure = "tiling: the compiled path " +
                    std::string(d.engaged ? "tiled" : "did not tile") + " the " +
                    stage_name(d.decode) + " input " + shape_string(d.input) +
                    ", but the config's rule (tile only above the " + std::to_string(limit) +
                    (d.decode ? " latent" : " px") + " tile min in height or width) says it " +
                    (rule ? "must tile" : "fits one tile") + " (" + d.text() + ")";
  }
  // Seam bands vs interiors: the tiled compiled output against the untiled reference.
  PreparedCase untiled = p;
  untiled.tiling.enabled = false;
  auto ref = run_reference(untiled, {});
  if (!ref.ok()) {
    if (check.failure.empty()) check.failure = "untiled reference: " + ref.error().message();
    return check;
  }
  const SeamBands bands = seam_bands(*geometry, *pipeline, p.input.shape());
  const auto& [name, got] = run.outputs.front();
  const Tensor* want = find_tensor(ref->outputs, name);
  if (!want || want->shape() != got.shape() || int64_t(bands.rows.size()) != got.dim(2) ||
      int64_t(bands.cols.size()) != got.dim(3))
    return check;
  for (bool seams : {true, false}) {
    const Tensor g = gather(got, bands, seams), r = gather(*want, bands, seams);
    if (g.numel() == 0) continue;
    auto m = compare_tensors(g, r, got.dtype());
    if (!m.ok()) continue;
    CheckpointRecord rec;
    rec.name = std::string(seams ? "seam:" : "interior:") + name;
    rec.graph = p.pipeline;
    rec.op_class = seams ? "seam" : "interior";
    rec.dtype = dtype_name(got.dtype());
    rec.accumulated = std::move(m).value();
    rec.accumulated.worst.clear();  // indices into the gathered elements, not the image
    rec.tolerance_basis = seams ? "not judged: vs untiled ref, blend bands"
                                : "not judged: vs untiled ref, tile interiors";
    check.records.push_back(std::move(rec));
  }
  return check;
}

}  // namespace tp
