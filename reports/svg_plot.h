// Inline SVG charts for self-contained HTML pages (no scripts, no network): axes with units and
// ticks (linear, or log10 for values spanning decades), a legend, points and polylines with
// hover titles, and labelled reference lines.
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
  bool lines = false, markers = true, dashed = false;
  std::string colour;  // empty: from the palette by index
};

struct PlotLine {  // a horizontal reference line
  double y = 0;
  std::string label;
};

std::string svg_plot(const std::string& title, const PlotAxis& x, const PlotAxis& y,
                     const std::vector<PlotSeries>& series, const std::vector<PlotLine>& lines = {},
                     int width = 760, int height = 420);

// Escapes text for XML (JUnit), HTML and SVG: markup characters, and control characters to spaces.
std::string markup_escape(const std::string& text);

}  // namespace tp
