// The plots of a case's section: each an inline SVG with a caption that says what it shows and
// how to read it. Layers are the checkpoints in execution order (pipeline outputs last); seam
// and interior rows of tiled cases are plotted apart.
#include <algorithm>
#include <cmath>
#include <map>

#include "harness/core/format.h"
#include "reports/case_section.h"
#include "reports/margins.h"
#include "reports/svg_plot.h"

namespace tp {
namespace {

constexpr std::size_t kMaxPlotted = 2000;  // past this, the worst of each run of layers is drawn
constexpr std::size_t kLabelled = 5;       // layers numbered on the error plot
constexpr int kPlotWidth = 1150;

using Rows = std::vector<const CheckpointRecord*>;

std::string sci(double v) { return printf_numbers("%.3g", v); }

bool is_seam_row(const CheckpointRecord& r) {
  return r.op_class == "seam" || r.op_class == "interior";
}

// Headroom and rounding bias are the low-precision dtypes' concern (fp32 values have both).
bool low_precision(const std::string& dtype) { return dtype != "f32" && dtype != "f64"; }

Rows layer_rows(const CaseResult& c) {
  Rows rows;
  for (const CheckpointRecord& r : c.checkpoints)
    if (!is_seam_row(r)) rows.push_back(&r);
  return rows;
}

// The factor the judged error may still grow by (0: past its bound or non-finite; inf: no
// bound or no error).
double margin_of(const CheckpointRecord& r) {
  const auto m = checkpoint_margin(r);
  return m ? m->margin : INFINITY;
}

// The indices of the rows to draw: all of them, or past kMaxPlotted the one nearest its bound
// in each run of consecutive rows (so every peak stays) and every failed row.
std::vector<std::size_t> plotted(const Rows& rows) {
  std::vector<std::size_t> keep;
  const std::size_t run = (rows.size() + kMaxPlotted - 1) / kMaxPlotted;
  for (std::size_t from = 0; from < rows.size(); from += std::max<std::size_t>(run, 1)) {
    const std::size_t to = std::min(rows.size(), from + std::max<std::size_t>(run, 1));
    std::size_t best = from;
    for (std::size_t i = from; i < to; ++i) {
      if (!rows[i]->passed && i != best) keep.push_back(i);
      if (margin_of(*rows[i]) < margin_of(*rows[best])) best = i;
    }
    keep.push_back(best);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  return keep;
}

std::string thinning_note(const Rows& rows, const std::vector<std::size_t>& drawn) {
  if (drawn.size() == rows.size()) return "";
  return " Of " + std::to_string(rows.size()) + " layers, the " + std::to_string(drawn.size()) +
         " drawn are the nearest its bound in each run of " +
         std::to_string((rows.size() + kMaxPlotted - 1) / kMaxPlotted) +
         " and every failed one; the HDF5 report holds them all.";
}

std::string row_title(const CheckpointRecord& r) {
  std::string t = r.name + " (" + r.op_class + ", stored in " + r.dtype + "): accumulated rel L2 " +
                  sci(r.accumulated.rel_l2);
  if (r.has_local) t += ", local " + sci(r.local.rel_l2);
  t += ", tolerance " + sci(r.tolerance_rel_l2) + (r.passed ? "" : " FAILED");
  return t;
}

std::string figure(const std::string& svg, const std::string& caption) {
  return "<figure>" + svg + "<figcaption>" + markup_escape(caption) + "</figcaption></figure>\n";
}

// A call's rows, "stepK/..." or "tileK/...": K, else -1.
int64_t call_of(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return -1;
  const std::size_t slash = name.find('/', prefix.size());
  int64_t k = -1;
  if (slash == std::string::npos ||
      !parse_int(std::string_view(name).substr(prefix.size(), slash - prefix.size()), k))
    return -1;
  return k;
}

struct CallStats {
  int64_t call = 0;
  const CheckpointRecord* last = nullptr;  // the call's last row: its output
  double max_accumulated = 0, max_local = 0;
};

std::vector<CallStats> per_call(const Rows& rows, const std::string& prefix) {
  std::map<int64_t, CallStats> calls;
  for (const CheckpointRecord* r : rows) {
    const int64_t k = call_of(r->name, prefix);
    if (k < 0) continue;
    CallStats& s = calls[k];
    s.call = k;
    s.last = r;
    s.max_accumulated = std::max(s.max_accumulated, r->accumulated.rel_l2);
    if (r->has_local) s.max_local = std::max(s.max_local, r->local.rel_l2);
  }
  std::vector<CallStats> out;
  for (const auto& [k, s] : calls) out.push_back(s);
  return out;
}

PlotSeries line_series(const std::string& name, bool dashed = false) {
  PlotSeries s;
  s.name = name;
  s.lines = true;
  s.dashed = dashed;
  return s;
}

}  // namespace

std::string error_profile_plot(const CaseResult& c) {
  const Rows rows = layer_rows(c);
  if (rows.empty()) return "";
  const std::vector<std::size_t> drawn = plotted(rows);
  // The layers nearest their bounds, numbered as in the table below the plot.
  std::map<const CheckpointRecord*, std::string> numbers;
  for (const CheckpointRecord* r : nearest_bounds(c, kLabelled))
    numbers[r] = std::to_string(numbers.size() + 1);
  PlotSeries acc = line_series("accumulated (whole run)");
  acc.markers = drawn.size() <= 150;
  PlotSeries local;
  local.name = "local (the layer alone)";
  PlotSeries tol = line_series("tolerance", true);
  tol.markers = false;
  tol.colour = "#777777";
  for (std::size_t i : drawn) {
    const CheckpointRecord& r = *rows[i];
    const auto number = numbers.find(&r);
    const std::string label = number == numbers.end() ? "" : number->second;
    acc.points.emplace_back(double(i), r.accumulated.rel_l2);
    acc.titles.push_back(row_title(r));
    acc.labels.push_back(r.has_local ? "" : label);
    tol.points.emplace_back(double(i), r.tolerance_rel_l2);
    if (!r.has_local) continue;
    local.points.emplace_back(double(i), r.local.rel_l2);
    local.titles.push_back(row_title(r));
    local.labels.push_back(label);
  }
  return figure(
      svg_plot("Error along execution order", {"layer (execution order; hover for names)", false},
               {"relative L2 error against the fp32 reference", true}, {acc, local, tol}, {},
               kPlotWidth, 440),
      "Each layer is judged by its local error (the group alone on the reference's inputs), a "
      "pipeline output by its accumulated error; a point above the dashed band breaks its "
      "tolerance. Local error shows which layer made the error, accumulated error what reached "
      "it from before. Numbered: the " +
          std::to_string(numbers.size()) +
          " layers nearest their bounds, as in the table below; hover a point for its name." +
          thinning_note(rows, drawn));
}

std::string step_plot(const CaseResult& c) {
  const std::vector<CallStats> steps = per_call(layer_rows(c), "step");
  if (steps.size() < 2) return "";
  PlotSeries last = line_series("output layer (accumulated)");
  PlotSeries worst_local = line_series("worst layer (local)", true);
  for (const CallStats& s : steps) {
    last.points.emplace_back(double(s.call), s.last->accumulated.rel_l2);
    last.titles.push_back(row_title(*s.last));
    worst_local.points.emplace_back(double(s.call), s.max_local);
  }
  const double first = steps.front().last->accumulated.rel_l2,
               end = steps.back().last->accumulated.rel_l2;
  double steepest = 0;
  int64_t at = 0;
  for (std::size_t k = 1; k < steps.size(); ++k) {
    const double g = steps[k].last->accumulated.rel_l2 / steps[k - 1].last->accumulated.rel_l2;
    if (std::isfinite(g) && g > steepest) steepest = g, at = steps[k].call;
  }
  return figure(svg_plot("Error per denoising step", {"step", false},
                         {"relative L2 error against the fp32 reference", true},
                         {last, worst_local}, {}, kPlotWidth, 380),
                "The trajectory: the accumulated error at the output of step " +
                    std::to_string(steps.front().call) + " is " + sci(first) + ", at step " +
                    std::to_string(steps.back().call) + " " + sci(end) + " (x" + sci(end / first) +
                    ")" +
                    (steepest > 1 ? "; its largest growth in one step is x" + sci(steepest) +
                                        " into step " + std::to_string(at)
                                  : "; it does not grow from one step to the next") +
                    ". Local error stays near the precision's rounding while the "
                    "accumulated error grows with each step's input.");
}

std::string tile_plot(const CaseResult& c) {
  const std::vector<CallStats> tiles = per_call(layer_rows(c), "tile");
  PlotSeries seam, interior;
  seam.name = "seam bands";
  interior.name = "tile interiors";
  int64_t outputs = 0;
  for (const CheckpointRecord& r : c.checkpoints) {
    if (r.op_class == "seam") seam.points.emplace_back(double(outputs++), r.accumulated.rel_l2);
    if (r.op_class == "interior")
      interior.points.emplace_back(double(outputs - 1), r.accumulated.rel_l2);
    if (is_seam_row(r)) (r.op_class == "seam" ? seam : interior).titles.push_back(row_title(r));
  }
  if (tiles.empty() && seam.points.empty()) return "";
  PlotSeries per_tile = line_series("worst layer (accumulated)");
  PlotSeries per_tile_local = line_series("worst layer (local)", true);
  for (const CallStats& t : tiles) {
    per_tile.points.emplace_back(double(t.call), t.max_accumulated);
    per_tile_local.points.emplace_back(double(t.call), t.max_local);
  }
  std::string out;
  if (!tiles.empty())
    out += figure(svg_plot("Error per tile", {"tile (in the order the tiler ran them)", false},
                           {"relative L2 error against the fp32 reference", true},
                           {per_tile, per_tile_local}, {}, kPlotWidth, 360),
                  "Each tile's worst layer; a tile far above the others points at its "
                  "position (an edge, a crop) rather than at a kernel.");
  if (!seam.points.empty())
    out += figure(
        svg_plot("Seam bands against tile interiors", {"pipeline output (in report order)", false},
                 {"relative L2 error of the tiled output", true}, {seam, interior}, {}, 760, 340),
        "The tiled output against the untiled reference over the tiles' blend bands "
        "and over the rest: seams well above interiors mean the blending (or the "
        "tiling decision) differs, not the arithmetic. Reported, not judged.");
  return out;
}

std::string headroom_plot(const CaseResult& c) {
  const Rows rows = layer_rows(c);
  const std::vector<std::size_t> drawn = plotted(rows);
  PlotSeries head = line_series("headroom");
  head.markers = drawn.size() <= 150;
  std::vector<std::pair<double, const CheckpointRecord*>> lowest;
  for (std::size_t i : drawn) {
    const CheckpointRecord& r = *rows[i];
    const double h = r.accumulated.headroom;
    if (!low_precision(r.dtype) || !(h > 0) || !std::isfinite(h)) continue;
    head.points.emplace_back(double(i), h);
    head.titles.push_back(r.name + ": stored in " + r.dtype + ", max |reference| " +
                          sci(r.accumulated.want_max_abs) + ", headroom x" + sci(h));
    lowest.emplace_back(h, &r);
  }
  if (head.points.empty()) return "";
  std::sort(lowest.begin(), lowest.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string least;
  for (std::size_t k = 0; k < lowest.size() && k < 3; ++k)
    least += (k ? "; " : "") + lowest[k].second->name + " x" + sci(lowest[k].first);
  return figure(
      svg_plot("Headroom of the activation dtype per layer",
               {"layer (execution order; hover for names)", false},
               {"dtype's largest finite / max |reference value|", true}, {head},
               {{1.0, "below 1: the reference's values leave the dtype's range"}}, kPlotWidth, 380),
      "How far each layer's largest reference value is from the largest finite value of the "
      "low-precision dtype the compiled path stores it in (layers stored in fp32 left out). The "
      "least: " +
          least + "." + thinning_note(rows, drawn));
}

std::string bias_plot(const CaseResult& c) {
  const Rows rows = layer_rows(c);
  const std::vector<std::size_t> drawn = plotted(rows);
  PlotSeries bias;
  bias.name = "mean signed error";
  bias.markers = drawn.size() <= 400;
  bias.lines = !bias.markers;
  PlotSeries hi = line_series("+2 standard errors", true), lo = hi;
  lo.name = "−2 standard errors";
  hi.markers = lo.markers = false;
  hi.colour = lo.colour = "#999999";
  for (std::size_t i : drawn) {
    // A layer's own rounding: the group alone where it ran alone (accumulated error carries the
    // layers' before it).
    const CheckpointRecord& r = *rows[i];
    const Metrics& m = r.has_local ? r.local : r.accumulated;
    if (m.count == 0 || !low_precision(r.dtype)) continue;
    bias.points.emplace_back(double(i), m.bias_ulp);
    bias.titles.push_back(r.name + (r.has_local ? " (local)" : " (accumulated)") + ": bias " +
                          sci(m.bias_ulp) + " ± " + sci(m.bias_se) + " ULPs of " + r.dtype + ", " +
                          sci(100 * m.toward_zero) + "% toward zero, " +
                          sci(100 * m.away_from_zero) + "% away");
    hi.points.emplace_back(double(i), m.bias_ulp + 2 * m.bias_se);
    lo.points.emplace_back(double(i), m.bias_ulp - 2 * m.bias_se);
  }
  if (bias.points.empty()) return "";
  return figure(svg_plot("Rounding bias per layer", {"layer (execution order)", false},
                         {"mean signed error in ULPs of the stored dtype", false}, {bias, hi, lo},
                         {{0.0, "unbiased"}}, kPlotWidth, 340),
                "Each layer's own error (the group alone on the reference's inputs, where it ran "
                "alone), signed toward the reference's magnitude, in ULPs of the low-precision "
                "dtype it is stored in. Round-to-nearest leaves the mean near zero; a store that "
                "truncates pulls it toward zero by about half a ULP, and the band (two standard "
                "errors) says how sure that is. Reported, not judged (the numerics contract "
                "judges it).");
}

std::string non_finite_plot(const CaseResult& c) {
  const Rows rows = layer_rows(c);
  PlotSeries got = line_series("in the compiled run");
  got.markers = true;
  PlotSeries want;
  want.name = "in the reference";
  bool any = false;
  for (std::size_t i : plotted(rows)) {
    const CheckpointRecord& r = *rows[i];
    any = any || r.accumulated.non_finite_got > 0;
    got.points.emplace_back(double(i), double(r.accumulated.non_finite_got));
    got.titles.push_back(r.name + ": " + std::to_string(r.accumulated.non_finite_got) +
                         " non-finite (" + std::to_string(r.accumulated.non_finite_new) +
                         " where the reference is finite)");
    const bool origin = c.provenance.found && r.name == c.provenance.checkpoint;
    got.labels.push_back(origin ? "origin: " + c.provenance.layer : "");
    if (r.accumulated.non_finite_want > 0)
      want.points.emplace_back(double(i), double(r.accumulated.non_finite_want));
  }
  if (!any) return "";
  return figure(svg_plot("Where the non-finite values went", {"layer (execution order)", false},
                         {"non-finite elements", true}, {got, want}, {}, kPlotWidth, 360),
                "Every layer after the origin that holds non-finite values, to the output "
                "(layers with none are off the log scale).");
}

}  // namespace tp
