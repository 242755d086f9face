// Inline SVG charts for self-contained HTML pages (no scripts, no network): axes with units and
// ticks (linear, or log10 for values spanning decades), a legend sized to its labels, points and
// polylines with hover titles, horizontal spread bars, and labelled reference lines. Series
// differ in colour and marker shape both (20 colours x 6 shapes: every pair distinct up to 60
// series).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tp {

struct PlotAxis {
  std::string label;  // with its unit, e.g. "median time per run (ms)"
  bool log = false;
};

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>>
      points;  // non-finite (or, on a log axis, non-positive) values are left out
  std::vector<std::string> titles;  // hover text per point (optional)
  std::vector<std::string> labels;  // text shown beside a point's marker (optional; "" for none)
  // Per point (optional): the x range its value comes from (repeated timings' fastest and
  // slowest), drawn as a horizontal bar through the marker.
  std::vector<std::pair<double, double>> x_spread;
  bool lines = false, markers = true, dashed = false;
  bool rings = false;  // markers drawn as rings around other series' points (a highlight)
  std::string colour;  // empty: from the palette by index
};

struct PlotLine {  // a horizontal reference line
  double y = 0;
  std::string label;
};

std::string svg_plot(const std::string& title, const PlotAxis& x, const PlotAxis& y,
                     const std::vector<PlotSeries>& series, const std::vector<PlotLine>& lines = {},
                     int width = 760, int height = 420);

// The width of `text` in a sans-serif font of `font_px` pixels, estimated from DejaVu Sans's
// advance widths (a little over, so a label sized by it is never cut).
double text_width(const std::string& text, double font_px);

// Escapes text for XML (JUnit), HTML and SVG: markup characters, and control characters to spaces.
std::string markup_escape(const std::string& text);

}  // namespace tp
