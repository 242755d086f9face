// A run's and a triage's report as a page (reports/run_page.h), as its reader sees it: the
// summary links a section per case; a failing case shows where its error grew, where its first
// non-finite value came from and the path it took, what to keep in fp32 and the repro; a
// denoiser's section its steps, a tiled case's its tiles and seams. The pages of a ci run with
// an injected fault and of a triage of the overflow fixture are rendered by headless Chromium.
#include "reports/run_page.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "harness/core/png_io.h"
#include "tests/support/command.h"
#include "tests/support/overflow_fixture.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::shell;
using testing::twinpath;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

CheckpointRecord row(const std::string& name, double accumulated, double local) {
  CheckpointRecord r;
  r.name = name;
  r.graph = "unet";
  r.group = 0;
  r.op_class = "conv";
  r.dtype = "f16";
  r.accumulated.count = r.local.count = 64;
  r.accumulated.rel_l2 = accumulated;
  r.accumulated.headroom = 30;
  r.accumulated.bias_ulp = -0.4;
  r.accumulated.bias_se = 0.05;
  r.has_local = local > 0;
  r.local.rel_l2 = local;
  r.tolerance_rel_l2 = 2e-3;
  return r;
}

// A denoiser's case that went non-finite in its second step, with the search's answer.
CaseResult failing_denoiser() {
  CaseResult c;
  c.id = "sdxl.denoise model=tiny-unet-xl res=64x64 w=f16 a=f16 acc=f32 steps=3";
  c.outcome = Outcome::kFailed;
  c.reason = "first non-finite value: conv_in overflowed f16";
  c.repro = "twinpath run --case '" + c.id + "'";
  for (int step = 0; step < 3; ++step)
    for (const char* layer : {"conv_in", "down_blocks.0.resnets.0.conv1", "conv_out"})
      c.checkpoints.push_back(
          row("step" + std::to_string(step) + "/" + layer, 1e-4 * std::pow(3.0, step), 3e-4));
  c.checkpoints[4].accumulated.non_finite_got = c.checkpoints[4].accumulated.non_finite_new = 12;
  c.checkpoints[5].accumulated.non_finite_got = c.checkpoints[5].accumulated.non_finite_new = 40;
  c.checkpoints[4].passed = false;
  c.checkpoints.push_back(row("output:latents", 0.2, 0));
  c.provenance.found = true;
  c.provenance.checkpoint = "step1/down_blocks.0.resnets.0.conv1";
  c.provenance.step = "step1";
  c.provenance.layer = "down_blocks.0.resnets.0.conv1";
  c.provenance.op = "conv2d";
  c.provenance.cause = "overflow";
  c.provenance.index = {0, 3, 7, 9};
  c.provenance.value = 70000;
  c.provenance.dtype_max = 65504;
  c.provenance.reference_max_abs = 71000;
  c.searched = true;
  c.keep_fp32 = {"down_blocks.0.resnets.0.conv1"};
  c.search_note = "found in 3 runs over 4 layers";
  c.search_runs = 3;
  return c;
}

TEST(RunPage, AFailingDenoiserShowsItsOriginPathStepsAndFix) {
  RunReport r;
  r.cases = {failing_denoiser()};
  const auto page = run_page_html(r, {});
  ASSERT_TRUE(page.ok()) << page.error().message();
  for (const char* part :
       {"Error along execution order", "Error per denoising step",
        "Where the first non-finite value came from", "The path the non-finite values took (2",
        "Where the non-finite values went", "Headroom of the activation dtype per layer",
        "Rounding bias per layer", "--keep-fp32 'down_blocks.0.resnets.0.conv1'",
        "twinpath run --case", "href=\"#case-0\"", "The layers nearest their bounds"})
    EXPECT_NE(page->find(part), std::string::npos) << part;
  // The origin's numbers, the steps' growth, and the layers nearest their bounds named.
  EXPECT_NE(page->find("step1/down_blocks.0.resnets.0.conv1"), std::string::npos);
  EXPECT_NE(page->find("65504"), std::string::npos);
  EXPECT_NE(page->find("(x9)"), std::string::npos) << "step 0 to 2 grew by 3 x 3";
  EXPECT_GE(count(*page, "class=\"label\""), 3u);
  EXPECT_EQ(page->find("Error per tile"), std::string::npos);
}

TEST(RunPage, ALargeRunDrawsTheFailingAndTheNearestPassingCases) {
  RunReport r;
  for (int i = 0; i < 60; ++i) {
    CaseResult c;
    c.id = "vae.decode model=tiny-kl res=64x64 seed=" + std::to_string(i);
    c.outcome = Outcome::kPassed;
    c.checkpoints = {row("decoder.conv_out", 1e-5, 1e-5 * (i + 1))};
    r.cases.push_back(c);
  }
  r.cases[7] = failing_denoiser();
  const auto page = run_page_html(r, {});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(count(*page, "<section"), 1 + kPageWorstPassing);
  EXPECT_NE(page->find("id=\"case-7\""), std::string::npos);
  EXPECT_NE(page->find("id=\"case-59\""), std::string::npos) << "the nearest its bound";
  EXPECT_EQ(page->find("id=\"case-0\""), std::string::npos);
  PageOptions failing;
  failing.failing = true;
  EXPECT_EQ(count(*run_page_html(r, failing), "<section"), 1u);
  PageOptions one;
  one.case_id = r.cases[3].id;
  EXPECT_EQ(count(*run_page_html(r, one), "<section"), 1u);
  one.case_id = "vae.decode model=nothing";
  const auto unknown = run_page_html(r, one);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("has no case"), std::string::npos);
}

TEST(RunPage, HundredsOfFailuresDrawOneOfEachReasonFirst) {
  RunReport r;
  for (int i = 0; i < 120; ++i) {
    CaseResult c = failing_denoiser();
    c.id += " seed=" + std::to_string(i);
    c.provenance.found = false;
    c.reason = "output:latents: rel L2 " + std::to_string(0.1 + i) + " exceeds 2e-03";
    r.cases.push_back(c);
  }
  r.cases[90].reason = "conv_in: biased rounding";
  r.cases[100].provenance.found = true;
  const auto page = run_page_html(r, {});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(count(*page, "<section"), kPageMaxSections);
  EXPECT_NE(page->find("id=\"case-0\""), std::string::npos) << "the first of its reason";
  EXPECT_NE(page->find("id=\"case-90\""), std::string::npos) << "the only one of its reason";
  EXPECT_NE(page->find("id=\"case-100\""), std::string::npos) << "the non-finite one";
}

// A full-size denoiser's 20 steps of 2000 checkpoints each: every plot thins to its peaks, so
// the page stays a page.
TEST(RunPage, FortyThousandCheckpointsMakeAPageOfMegabytesNotHundreds) {
  CaseResult c = failing_denoiser();
  const CheckpointRecord first = c.checkpoints.front();
  c.checkpoints.assign(40000, first);
  for (std::size_t i = 0; i < c.checkpoints.size(); ++i) {
    c.checkpoints[i].name = "step" + std::to_string(i / 2000) + "/layer" + std::to_string(i);
    c.checkpoints[i].accumulated.rel_l2 = 1e-4 * (1 + double(i % 97) / 97);
    c.checkpoints[i].accumulated.non_finite_got = i > 30000 ? 5 : 0;
  }
  c.checkpoints[123].passed = false;
  RunReport r;
  r.cases = {c};
  const auto page = run_page_html(r, {});
  ASSERT_TRUE(page.ok());
  EXPECT_LT(page->size(), 8u << 20) << "a plot drew every checkpoint";
  EXPECT_NE(page->find("step0/layer123"), std::string::npos) << "a failed checkpoint is drawn";
  EXPECT_NE(page->find("the HDF5 report holds them all"), std::string::npos);
}

TEST(RunPage, NamesFromTheReportAreEscaped) {
  RunReport r;
  CaseResult c = failing_denoiser();
  c.id = "vae.decode model=<script>alert(1)</script>";
  c.checkpoints[0].name = "step0/<b>conv_in";
  r.cases = {c};
  const auto page = run_page_html(r, {});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->find("<script>"), std::string::npos);
  EXPECT_EQ(page->find("<b>conv_in"), std::string::npos);
  EXPECT_NE(page->find("&lt;script&gt;"), std::string::npos);
}

std::string read_text(const fs::path& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

// The page rendered by headless Chromium: every plot's series colours show, nothing reaches
// the right edge, and the DOM it parsed holds every section and plot the HTML has.
void check_in_browser(const fs::path& page, const std::vector<std::string>& colours) {
  if (shell("command -v chromium").code != 0)
    GTEST_SKIP() << "chromium is not installed (tools/install-deps.sh installs it)";
  const std::string html = read_text(page);
  const std::string flags = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars ";
  const auto dom = shell(flags + "--dump-dom file://" + page.string() + " 2>/dev/null");
  EXPECT_EQ(count(dom.output, "<section"), count(html, "<section"));
  EXPECT_EQ(count(dom.output, "<svg"), count(html, "<svg"));
  const fs::path png = page.parent_path() / "page.png";
  const int width = 1280, height = 16000;
  const auto shot =
      shell(flags + "--window-size=" + std::to_string(width) + "," + std::to_string(height) +
            " --screenshot=" + png.string() + " file://" + page.string());
  ASSERT_TRUE(fs::exists(png)) << shot.output;
  auto image = read_png(png.string());
  ASSERT_TRUE(image.ok()) << image.error().message();
  const int64_t h = image->dim(2), w = image->dim(3), plane = h * w;
  const float* d = image->data<float>();
  auto channel = [&](int64_t i, int c) { return int((d[c * plane + i] + 1) * 127.5f + 0.5f); };
  int64_t edge = 0;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = w - 8; x < w; ++x)
      edge += channel(y * w + x, 0) + channel(y * w + x, 1) + channel(y * w + x, 2) < 3 * 230;
  EXPECT_EQ(edge, 0) << "something reaches the page's right edge";
  for (const std::string& colour : colours) {
    const int want[3] = {std::stoi(colour.substr(1, 2), nullptr, 16),
                         std::stoi(colour.substr(3, 2), nullptr, 16),
                         std::stoi(colour.substr(5, 2), nullptr, 16)};
    int64_t seen = 0;
    for (int64_t i = 0; i < plane; ++i)
      seen += std::abs(channel(i, 0) - want[0]) + std::abs(channel(i, 1) - want[1]) +
                  std::abs(channel(i, 2) - want[2]) <
              24;
    EXPECT_GT(seen, 20) << colour << " does not show on the rendered page";
  }
}

class RunPageCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tp_run_page_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// A kernel change that truncates f16 stores, caught on two ci cases (a denoiser and a tiled
// decode), beside a decode that overflows f16: the page names each, its steps, its tiles and
// seams, the overflow's origin and fix, and the regressions against the committed ci baseline.
TEST_F(RunPageCli, ACiRunWithAnInjectedFault) {
  const std::string cases =
      " --case 'sdxl.denoise model=tiny-unet-xl res=64x64 w=f16 a=f16 acc=f32 steps=3 "
      "inject=f16-store-truncate'"
      " --case 'vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 tiling=on tile=32:16 "
      "inject=f16-store-truncate'"
      " --case 'vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 "
      "boost=decoder.up_blocks.0.resnets.0.conv1*100000'";
  const auto r = twinpath("run" + cases + " --search --report " + p("run.h5") + " --baseline " +
                          TWINPATH_SOURCE_DIR + "/cases/baselines/ci.txt.gz --page " + p("page"));
  ASSERT_EQ(r.code, 1) << r.output;
  ASSERT_NE(r.output.find("page: " + p("page/report.html")), std::string::npos) << r.output;
  const std::string page = read_text(p("page/report.html"));
  EXPECT_EQ(count(page, "<section"), 3u);
  for (const char* part :
       {"Error per denoising step", "Error per tile", "Seam bands against tile interiors",
        "Where the first non-finite value came from", "What to keep in fp32", "regressions against",
        "Rounding bias per layer", "--keep-fp32 'decoder.up_blocks.0.resnets.0.conv1'"})
    EXPECT_NE(page.find(part), std::string::npos) << part;
  // The contract check (LibTorch's contract mode) names the truncation at its first store and
  // leaves it unsearched; without it the denoiser's drift across the steps gives it away.
  for (const char* part :
       TWINPATH_TEST_HAVE_TORCH
           ? std::vector<const char*>{"biased rounding",
                                      "not searched: the case breaks the numerics contract"}
           : std::vector<const char*>{"faster than a random walk", "still fails"})
    EXPECT_NE(page.find(part), std::string::npos) << part;
  EXPECT_EQ(count(page, "Error along execution order"), 3u);
  // The same page again from the report alone, and only the failing cases' sections.
  const auto again = twinpath("report page " + p("run.h5") + " --failing --out " + p("again") +
                              " --baseline " + TWINPATH_SOURCE_DIR + "/cases/baselines/ci.txt.gz");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(read_text(p("again/report.html")).find("regressions against"), std::string::npos);
  const auto unknown = twinpath("report page " + p("run.h5") + " --case nothing --out " + p("x"));
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.output.find("has no case 'nothing'"), std::string::npos) << unknown.output;
  check_in_browser(p("page/report.html"), {"#0067a5", "#be0032", "#777777", "#fbe9e9"});
}

// The overflow fixture (a user's fp16 stack, dumped): the origin, its values and headroom, the
// path to the output and the layers to keep in fp32.
TEST_F(RunPageCli, ATriageOfTheOverflowFixture) {
  const std::string fx = testing::activation_fixtures();
  ASSERT_EQ(testing::init_overflow_user_model(p("user_kl")).code, 0);
  const auto r = twinpath("triage --activations " + fx + "kl-overflow-f16.safetensors --model " +
                          p("user_kl") + " --page " + p("page"));
  ASSERT_EQ(r.code, 1) << r.output;
  const std::string page = read_text(p("page/report.html"));
  for (const char* part :
       {"Where the first non-finite value came from", "decoder.up_blocks.0.resnets.0.conv2",
        "overflow", "The path the non-finite values took", "Where the non-finite values went",
        "What to keep in fp32", "Error along execution order", "headroom"})
    EXPECT_NE(page.find(part), std::string::npos) << part;
  check_in_browser(p("page/report.html"), {"#0067a5", "#be0032", "#fbe9e9"});
}

TEST_F(RunPageCli, APageFolderThatCannotBeMadeIsOneSentenceBeforeTheRun) {
  std::ofstream(p("file")) << "x";
  const auto r = twinpath("run --case 'vae.decode model=tiny-kl res=32x32' --report " + p("r.h5") +
                          " --page " + p("file"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("cannot make the page's folder"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(p("r.h5"))) << "the run went ahead";
}

}  // namespace
}  // namespace tp
