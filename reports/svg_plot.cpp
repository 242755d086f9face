#include "reports/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace tp {
namespace {

// Kelly's colours of maximum contrast (white and black left out: the background and the peer).
const char* const kPalette[] = {"#0067a5", "#be0032", "#008856", "#f38400", "#875692",
                                "#882d17", "#e68fac", "#2b3d26", "#a1caf1", "#f3c300",
                                "#604e97", "#8db600", "#b3446c", "#848482", "#e25822",
                                "#c2b280", "#654522", "#f99379", "#dcd300", "#f6a600"};
constexpr std::size_t kColours = sizeof kPalette / sizeof *kPalette;
constexpr std::size_t kShapes = 6;  // circle, square, triangle, diamond, down triangle, hexagon

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick label: plain for ordinary magnitudes, 1e-3 style otherwise.
std::string tick_label(double v) {
  char buf[32];
  const double a = std::abs(v);
  if (v == 0) return "0";
  if (a >= 1e-2 && a < 1e5)
    std::snprintf(buf, sizeof buf, "%g", v);
  else
    std::snprintf(buf, sizeof buf, "%.0e", v);
  return buf;
}

struct Scale {
  bool log = false;
  double lo = 0, hi = 1;    // data range (log10 of it on a log axis)
  double from = 0, to = 1;  // pixels
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
  double at(double v) const {
    const double t = log ? std::log10(v) : v;
    return from + (t - lo) / (hi - lo) * (to - from);
  }
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      const int a = int(std::floor(lo)), b = int(std::ceil(hi));
      const int step = std::max(1, (b - a) / 8);
      for (int e = a; e <= b; e += step)
        if (e >= lo - 1e-9 && e <= hi + 1e-9) out.push_back(std::pow(10.0, e));
      return out;
    }
    const double span = hi - lo, raw = span / 6, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (raw <= m * mag) {
        step = m * mag;
        break;
      }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
      out.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }
};

Scale fit(const PlotAxis& axis, std::vector<double> values, double from, double to) {
  Scale s;
  s.log = axis.log;
  s.from = from;
  s.to = to;
  values.erase(std::remove_if(values.begin(), values.end(), [&](double v) { return !s.usable(v); }),
               values.end());
  if (values.empty()) values = {axis.log ? 1.0 : 0.0};
  double lo = *std::min_element(values.begin(), values.end()),
         hi = *std::max_element(values.begin(), values.end());
  if (s.log) {
    lo = std::floor(std::log10(lo));
    hi = std::ceil(std::log10(hi));
    if (hi <= lo) hi = lo + 1;
  } else {
    const double pad = hi > lo ? (hi - lo) * 0.05 : std::max(std::abs(hi), 1.0) * 0.5;
    lo = lo >= 0 && lo - pad < 0 ? 0 : lo - pad;
    hi += pad;
  }
  s.lo = lo;
  s.hi = hi;
  return s;
}

// The SVG element a marker of shape `shape` is.
std::string marker_tag(std::size_t shape) {
  const std::size_t s = shape % kShapes;
  return s == 0 ? "circle" : s == 1 ? "rect" : "polygon";
}

// The opening tag, unclosed, of a marker of shape `shape` (kShapes of them) centred at (x, y),
// about 9 px across.
std::string marker(std::size_t shape, double x, double y, const std::string& colour) {
  auto polygon = [&](std::initializer_list<std::pair<double, double>> corners) {
    std::string points;
    for (const auto& [dx, dy] : corners)
      points += (points.empty() ? "" : " ") + num(x + dx) + "," + num(y + dy);
    return "<polygon points=\"" + points + "\" fill=\"" + colour + "\"";
  };
  switch (shape % kShapes) {
    case 1:
      return "<rect x=\"" + num(x - 4) + "\" y=\"" + num(y - 4) + "\" width=\"8\" height=\"8\" " +
             "fill=\"" + colour + "\"";
    case 2:
      return polygon({{0, -5.5}, {5, 3.5}, {-5, 3.5}});
    case 3:
      return polygon({{0, -5.5}, {5, 0}, {0, 5.5}, {-5, 0}});
    case 4:
      return polygon({{0, 5.5}, {5, -3.5}, {-5, -3.5}});
    case 5:
      return polygon({{-2.5, -4.5}, {2.5, -4.5}, {5, 0}, {2.5, 4.5}, {-2.5, 4.5}, {-5, 0}});
    default:
      return "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"4.5\" fill=\"" + colour +
             "\"";
  }
}

// The opening tag, unclosed, of a ring around a marker at (x, y).
std::string ring(double x, double y, const std::string& colour) {
  return "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"8.5\" fill=\"none\" stroke=\"" +
         colour + "\" stroke-width=\"1.5\"";
}

// A point's label: above it, toward the plot's middle so that it is not cut at an edge.
std::string point_label(const Scale& x, const Scale& y, double px, double py,
                        const std::string& text) {
  const bool left_half = x.at(px) < (x.from + x.to) / 2;
  return "<text class=\"label\" x=\"" + num(x.at(px) + (left_half ? 6 : -6)) + "\" y=\"" +
         num(y.at(py) - 8) + "\" font-size=\"11\" text-anchor=\"" + (left_half ? "start" : "end") +
         "\">" + markup_escape(text) + "</text>\n";
}

}  // namespace

double text_width(const std::string& text, double font_px) {
  double em = 0;
  for (char c : text) {
    if (std::string_view(",.:;' |!il").find(c) != std::string_view::npos)
      em += 0.34;
    else if (std::string_view("=+<>~*").find(c) != std::string_view::npos)
      em += 0.84;
    else if (c == 'm' || c == 'w' || c == 'M' || c == 'W')
      em += 0.98;
    else if (c >= 'A' && c <= 'Z')
      em += 0.78;
    else
      em += 0.66;  // digits 0.64, most lower case up to 0.64
  }
  return em * font_px;
}

std::string markup_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:  // XML 1.0 has no other control characters
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

std::string svg_plot(const std::string& title, const PlotAxis& xa, const PlotAxis& ya,
                     const std::vector<PlotSeries>& series, const std::vector<PlotLine>& lines,
                     int width, int height) {
  // The legend beside the plot, as wide as its longest label and as tall as its rows: the
  // picture grows rather than cutting a label.
  double longest = 0;
  for (const PlotSeries& s : series) longest = std::max(longest, text_width(s.name, 12));
  const int legend_w = std::max(120, int(std::ceil(longest)) + 40), left = 78,
            right = legend_w + 20, top = 36, bottom = 58;
  width = std::max(width, left + 520 + right);
  height = std::max(height, top + bottom + 16 + 18 * int(series.size()));
  std::vector<double> xs, ys;
  for (const PlotSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      xs.push_back(x);
      ys.push_back(y);
    }
    for (const auto& [lo, hi] : s.x_spread) xs.insert(xs.end(), {lo, hi});
  }
  for (const PlotLine& l : lines) ys.push_back(l.y);
  const Scale x = fit(xa, xs, left, width - right), y = fit(ya, ys, height - bottom, top);
  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
                  "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
                  std::to_string(width) + " " + std::to_string(height) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + num(left) + "\" y=\"20\" font-size=\"15\" font-weight=\"bold\">" +
       markup_escape(title) + "</text>\n";
  // Grid, ticks and tick labels.
  for (double t : x.ticks()) {
    const double px = x.at(t);
    o += "<line x1=\"" + num(px) + "\" y1=\"" + num(top) + "\" x2=\"" + num(px) + "\" y2=\"" +
         num(height - bottom) + "\" stroke=\"#e4e4e4\"/>\n<text x=\"" + num(px) + "\" y=\"" +
         num(height - bottom + 16) + "\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  }
  for (double t : y.ticks()) {
    const double py = y.at(t);
    o += "<line x1=\"" + num(left) + "\" y1=\"" + num(py) + "\" x2=\"" + num(width - right) +
         "\" y2=\"" + num(py) + "\" stroke=\"#e4e4e4\"/>\n<text x=\"" + num(left - 6) + "\" y=\"" +
         num(py + 4) + "\" text-anchor=\"end\">" + tick_label(t) + "</text>\n";
  }
  o += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(width - right - left) +
       "\" height=\"" + num(height - bottom - top) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += "<text x=\"" + num((left + width - right) / 2.0) + "\" y=\"" + num(height - 14) +
       "\" text-anchor=\"middle\">" + markup_escape(xa.label) + (xa.log ? " (log scale)" : "") +
       "</text>\n";
  o += "<text transform=\"translate(18," + num((top + height - bottom) / 2.0) +
       ") rotate(-90)\" text-anchor=\"middle\">" + markup_escape(ya.label) +
       (ya.log ? " (log scale)" : "") + "</text>\n";
  for (const PlotLine& l : lines) {
    if (!y.usable(l.y)) continue;
    const double py = y.at(l.y);
    o += "<line x1=\"" + num(left) + "\" y1=\"" + num(py) + "\" x2=\"" + num(width - right) +
         "\" y2=\"" + num(py) + "\" stroke=\"#b00\" stroke-dasharray=\"6 3\"/>\n<text x=\"" +
         num(left + 6) + "\" y=\"" + num(py - 5) + "\" fill=\"#b00\">" + markup_escape(l.label) +
         "</text>\n";
  }
  // Series and legend.
  for (std::size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const std::string colour = s.colour.empty() ? kPalette[i % kColours] : s.colour;
    std::string path;
    for (std::size_t k = 0; k < s.points.size(); ++k) {
      const auto& [px, py] = s.points[k];
      if (!x.usable(px) || !y.usable(py)) continue;
      path += (path.empty() ? "" : " ") + num(x.at(px)) + "," + num(y.at(py));
      if (k < s.x_spread.size() && x.usable(s.x_spread[k].first) &&
          x.usable(s.x_spread[k].second)) {
        const double a = x.at(s.x_spread[k].first), b = x.at(s.x_spread[k].second), yy = y.at(py);
        o += "<path class=\"spread\" d=\"M" + num(a) + "," + num(yy - 4) + "v8M" + num(a) + "," +
             num(yy) + "H" + num(b) + "M" + num(b) + "," + num(yy - 4) + "v8\" stroke=\"" + colour +
             "\" stroke-width=\"1.4\" fill=\"none\"/>\n";
      }
      if (k < s.labels.size() && !s.labels[k].empty()) o += point_label(x, y, px, py, s.labels[k]);
      if (s.markers && s.rings) {
        o += ring(x.at(px), y.at(py), colour) + ">";
        if (k < s.titles.size()) o += "<title>" + markup_escape(s.titles[k]) + "</title>";
        o += "</circle>\n";
      } else if (s.markers) {
        o += marker(i, x.at(px), y.at(py), colour) + ">";
        if (k < s.titles.size()) o += "<title>" + markup_escape(s.titles[k]) + "</title>";
        o += "</" + marker_tag(i) + ">\n";
      }
    }
    if (s.lines && !path.empty())
      o += "<polyline points=\"" + path + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"1.6\"" + (s.dashed ? " stroke-dasharray=\"5 4\"" : "") + "><title>" +
           markup_escape(s.name) + "</title></polyline>\n";
    const double ly = top + 8 + 18.0 * double(i), lx = width - legend_w + 4;
    o += s.lines ? "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(lx + 18) +
                       "\" y2=\"" + num(ly) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"" +
                       (s.dashed ? " stroke-dasharray=\"5 4\"" : "") + "/>\n"
                 : (s.rings ? ring(lx + 9, ly, colour) : marker(i, lx + 9, ly, colour)) + "/>\n";
    o += "<text x=\"" + num(lx + 24) + "\" y=\"" + num(ly + 4) + "\">" + markup_escape(s.name) +
         "</text>\n";
  }
  return o + "</svg>\n";
}

}  // namespace tp
