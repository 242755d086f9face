// Tiled cases: the compiled path's engage decision against the rule computed from the config
// (field report 4: a threshold taken from the stride tiles inputs that fit one tile), and the
// tiled output against the untiled reference with the blend bands measured apart from the tile
// interiors: seams are where tiling changes the picture, so they are reported, not judged.
#include "harness/runner/runs.h"

namespace tp {
namespace {

// The elements of `t` (NCHW, or a video's NCTHW) inside (or outside) the seam bands, as one row.
Tensor gather(const Tensor& t, const SeamBands& bands, bool seams) {
  const Tensor f = t.to(DType::kF64);
  const bool video = f.rank() == 5;
  const int64_t planes = f.dim(0) * f.dim(1), frames = video ? f.dim(2) : 1;
  const int64_t h = f.dim(f.rank() - 2), w = f.dim(f.rank() - 1);
  std::vector<double> picked;
  const double* v = f.data<double>();
  for (int64_t n = 0; n < planes; ++n)
    for (int64_t k = 0; k < frames; ++k)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          if ((video ? bands.at(k, y, x) : bands.at(y, x)) == seams)
            picked.push_back(v[((n * frames + k) * h + y) * w + x]);
  Tensor out(DType::kF64, {int64_t(picked.size())});
  std::copy(picked.begin(), picked.end(), out.data<double>());
  return out;
}

}  // namespace

TilingCheck check_tiling(const PreparedCase& p, const CompiledRun& run) {
  TilingCheck check;
  // Tiling rules are the families' (prepare_case refuses tiling=on on a family without).
  const Family& family = p.model->family();
  const ModelConfig& config = *p.model->config;
  // The case's own stages are the session's last decisions (a warm= model ran first): a chained
  // pipeline records one per graph.
  const std::vector<TilingDecision>& all = run.session->tiling();
  const std::size_t stages = p.descriptor().handoff ? 2 : 1;
  bool tiled = p.tiling.enabled;
  for (std::size_t i = all.size() < stages ? 0 : all.size() - stages; i < all.size(); ++i) {
    tiled = tiled || all[i].engaged || all[i].framewise;
    if (check.failure.empty())
      if (std::string why = family.check_tiling_decision(config, p.tiling, all[i]); !why.empty())
        check.failure = "tiling: " + why;
  }
  // A video VAE records its decisions on every run (it tiles in time by default): one that
  // tiled nothing has no seams to measure.
  if (!tiled) return check;
  // Seam bands vs interiors: the tiled compiled output against the untiled reference.
  PreparedCase untiled = p;
  untiled.tiling = TilingOptions::none();
  auto ref = run_reference(untiled, {});
  if (!ref.ok()) {
    if (check.failure.empty()) check.failure = "untiled reference: " + ref.error().message();
    return check;
  }
  auto bands = family.seam_bands(config, p.tiling, p.pipeline, p.input.shape());
  if (!bands.ok()) {
    if (check.failure.empty()) check.failure = "tiling: " + bands.error().message();
    return check;
  }
  const auto& [name, got] = run.outputs.front();
  const Tensor* want = find_tensor(ref->outputs, name);
  const int64_t rank = got.rank();
  if (!want || want->shape() != got.shape() || (rank != 4 && rank != 5) ||
      int64_t(bands->rows.size()) != got.dim(rank - 2) ||
      int64_t(bands->cols.size()) != got.dim(rank - 1) ||
      (rank == 5 && !bands->frames.empty() && int64_t(bands->frames.size()) != got.dim(2)))
    return check;
  for (bool seams : {true, false}) {
    const Tensor g = gather(got, *bands, seams), r = gather(*want, *bands, seams);
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
