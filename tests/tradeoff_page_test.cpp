// The tradeoff page as a reader sees it: every policy its own colour and marker with its full
// label, the spread of its timed runs, and no policy called dominated by one whose timings
// overlap its own; the scatter plot rendered by headless Chromium with nothing cut at its edge.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "harness/core/png_io.h"
#include "reports/tradeoff_report.h"
#include "tests/support/command.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::shell;
using testing::twinpath;

PolicyPoint timed(const std::string& policy, double rel_l2, double lo, double median, double hi) {
  PolicyPoint p;
  p.policy = policy;
  p.resolution = "64x64";
  p.ran = true;
  p.rel_l2 = rel_l2;
  p.seconds_min = lo, p.seconds_median = median, p.seconds_max = hi;
  return p;
}

TEST(TradeoffPage, OverlappingTimingsDominateNothing) {
  Tradeoff t;
  // b is more accurate and faster by its median, but a's fastest run beat b's slowest.
  t.points = {timed("a", 1e-2, 1.0, 3.0, 4.0), timed("b", 1e-3, 1.5, 2.0, 2.5)};
  EXPECT_EQ(pareto_front(t, "64x64"), (std::vector<std::size_t>{1, 0}));
  t.points[0].seconds_min = 2.6;  // now every run of b beat every run of a
  EXPECT_EQ(pareto_front(t, "64x64"), (std::vector<std::size_t>{1}));
}

// The colours `#rrggbb` an SVG fills or strokes with, less the axes', grid's and background's.
std::set<std::string> series_colours(const std::string& svg) {
  std::set<std::string> colours;
  static const std::regex kColour("(fill|stroke)=\"(#[0-9a-f]{6})\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kColour);
       it != std::sregex_iterator(); ++it)
    colours.insert((*it)[2].str());
  for (const char* frame : {"#e4e4e4", "#333333", "#ffffff"}) colours.erase(frame);
  return colours;
}

TEST(TradeoffPage, EveryPolicyHasItsOwnColourMarkerLabelAndSpread) {
  const fs::path dir =
      fs::temp_directory_path() / ("tp_tradeoff_page_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto r = twinpath("tradeoff --model tiny-kl --res 32x32 --repeats 3 --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  std::stringstream html;
  html << std::ifstream(dir / "report.html").rdbuf();
  const std::string page = html.str();
  const std::string svg =
      page.substr(page.find("<svg"), page.find("</svg>") - page.find("<svg") + 6);

  // Every measured policy (and the peer) is a legend entry with its whole name, a marker whose
  // colour and shape no other has, and a spread bar.
  std::vector<std::string> names;
  static const std::regex kMeasured(R"(\] 32x32 (\S+): rel L2)");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), kMeasured);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1].str());
  ASSERT_GE(names.size(), 13u) << r.output;
  for (const std::string& name : names)
    EXPECT_NE(svg.find(">" + name + "</text>"), std::string::npos) << name;
  std::set<std::string> markers;  // the legend's: element and fill
  static const std::regex kLegend(
      R"re(<(circle|rect|polygon) [^>]*fill="(#[0-9a-f]{3,6})"/>\n<text)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kLegend);
       it != std::sregex_iterator(); ++it)
    markers.insert((*it)[1].str() + " " + (*it)[2].str());
  EXPECT_GE(markers.size(), names.size()) << "two series share a colour and a marker";
  std::size_t spreads = 0;
  for (std::size_t at = svg.find("class=\"spread\""); at != std::string::npos;
       at = svg.find("class=\"spread\"", at + 1))
    ++spreads;
  EXPECT_GE(spreads, names.size());
  EXPECT_NE(page.find("<th>max ms</th>"), std::string::npos);

  if (shell("command -v chromium").code != 0)
    GTEST_SKIP() << "chromium is not installed (tools/install-deps.sh installs it)";
  // The scatter plot alone, at its own size: its right edge is blank (no label cut there), and
  // every series colour shows.
  std::smatch size;
  ASSERT_TRUE(std::regex_search(svg, size, std::regex("width=\"(\\d+)\" height=\"(\\d+)\"")));
  const int width = std::stoi(size[1].str()), height = std::stoi(size[2].str());
  std::ofstream(dir / "scatter.svg") << svg;
  const fs::path png = dir / "scatter.png";
  const auto shot = shell(
      "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--window-size=" +
      std::to_string(width) + "," + std::to_string(height) + " --screenshot=" + png.string() +
      " file://" + (dir / "scatter.svg").string());
  ASSERT_TRUE(fs::exists(png)) << shot.output;
  auto image = read_png(png.string());
  ASSERT_TRUE(image.ok()) << image.error().message();
  const int64_t h = image->dim(2), w = image->dim(3), plane = h * w;
  ASSERT_EQ(w, width);
  const float* d = image->data<float>();
  auto rgb = [&](int64_t i) {
    return std::array<int, 3>{int((d[i] + 1) * 127.5f + 0.5f),
                              int((d[plane + i] + 1) * 127.5f + 0.5f),
                              int((d[2 * plane + i] + 1) * 127.5f + 0.5f)};
  };
  int64_t inked_edge = 0;
  for (int64_t row = 0; row < h; ++row)
    for (int64_t col = w - 6; col < w; ++col) {
      const auto c = rgb(row * w + col);
      inked_edge += c[0] + c[1] + c[2] < 3 * 230;
    }
  EXPECT_EQ(inked_edge, 0) << "something reaches the picture's right edge: a cut label?";
  for (const std::string& colour : series_colours(svg)) {
    const int want[3] = {std::stoi(colour.substr(1, 2), nullptr, 16),
                         std::stoi(colour.substr(3, 2), nullptr, 16),
                         std::stoi(colour.substr(5, 2), nullptr, 16)};
    int64_t seen = 0;
    for (int64_t i = 0; i < plane; ++i) {
      const auto c = rgb(i);
      seen += std::abs(c[0] - want[0]) + std::abs(c[1] - want[1]) + std::abs(c[2] - want[2]) < 24;
    }
    EXPECT_GT(seen, 20) << colour << " does not show in the rendered plot";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tp
