// `twinpath tradeoff` end to end on tiny-kl: report.h5 read by h5py, the page self-contained,
// rendered by headless Chromium to a PNG that is not blank; wrong inputs get one sentence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/core/png_io.h"
#include "tests/support/command.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::shell;
using testing::twinpath;

TEST(Tradeoff, WritesReportAndAPageThatRendersInChromium) {
  const fs::path dir = fs::temp_directory_path() / ("tp_tradeoff_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto r = twinpath(
      "tradeoff --model tiny-kl --res 32x32 --repeats 1 --policy w=f16,a=f16,acc=f32 "
      "--policy w=bf16,a=bf16,acc=f32 --policy w=f16,a=bf16,acc=f32 --out " +
      dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("32x32 w=f16,a=bf16,acc=f32: not run: "), std::string::npos) << r.output;
  // LibTorch's CPU ops doing the same decode, beside the policies (a build without LibTorch,
  // such as the sanitizer preset, has no peer row).
  const bool peer = TWINPATH_TEST_HAVE_TORCH;
  if (peer) {
    EXPECT_NE(r.output.find("[4/4] 32x32 LibTorch CPU f32: rel L2 "), std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find(peer ? "3 of 4 policy x resolution points measured"
                               : "2 of 3 policy x resolution points measured"),
            std::string::npos)
      << r.output;

  const std::string script =
      "import h5py, sys, math\n"
      "f = h5py.File(sys.argv[1], 'r')\n"
      "assert f.attrs['kind'] == 'tradeoff' and f.attrs['model'] == 'tiny-kl'\n"
      "p = f['points'][:]\n" +
      std::string(
          peer ? "assert list(p['ran']) == [1, 1, 0, 1] and list(p['peer']) == [0, 0, 0, 1], p\n"
                 "assert p[3]['rel_l2'] < 1e-5 and p[3]['pareto'] == 0, p[3]\n"
               : "assert list(p['ran']) == [1, 1, 0] and not p['peer'].any(), p\n") +
      "assert 0 < p[0]['rel_l2'] < p[1]['rel_l2'] < 0.1, p['rel_l2']\n"
      "assert p[0]['psnr_db'] > p[1]['psnr_db'] > 20 and p[0]['seconds_median'] > 0 and "
      "p[0]['weight_bytes'] > 0\n"
      "assert b'bf16' in p[2]['note'] and b'f16' in p[2]['note']\n"
      "assert p['pareto'][:2].any()\n"
      "g = f['resolutions']['32x32']\n"
      "assert g['layer_rel_l2'].shape == (2, len(g['layers'])) and len(g['layers']) > 20\n"
      "assert (g['f16_headroom'][0] > 1).all()\n"
      "print('h5py ok')\n";
  std::ofstream(dir / "check.py") << script;
  const auto py =
      shell("/usr/bin/python3 " + (dir / "check.py").string() + " " + (dir / "report.h5").string());
  EXPECT_NE(py.output.find("h5py ok"), std::string::npos) << py.output;
  // `report show` reads run reports; on this one it says what it is and where to look.
  const auto shown = twinpath("report show " + (dir / "report.h5").string());
  EXPECT_EQ(shown.code, 2) << shown.output;
  EXPECT_NE(shown.output.find("is a report of `twinpath tradeoff`"), std::string::npos)
      << shown.output;
  EXPECT_NE(shown.output.find("open the page report.html beside it"), std::string::npos)
      << shown.output;

  std::stringstream html;
  html << std::ifstream(dir / "report.html").rdbuf();
  const std::string page = html.str();
  std::size_t svgs = 0;
  for (std::size_t at = page.find("<svg"); at != std::string::npos; at = page.find("<svg", at + 1))
    ++svgs;
  EXPECT_EQ(svgs, 4u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_NE(page.find("Pareto front"), std::string::npos);
  EXPECT_NE(page.find("median time per run (ms)"), std::string::npos);

  if (shell("command -v chromium").code != 0)
    GTEST_SKIP() << "chromium is not installed (tools/install-deps.sh installs it)";
  const fs::path png = dir / "page.png";
  const auto shot = shell(
      "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1600 "
      "--screenshot=" +
      png.string() + " file://" + (dir / "report.html").string() + " 2>&1");
  ASSERT_TRUE(fs::exists(png)) << shot.output;
  auto image = read_png(png.string());
  ASSERT_TRUE(image.ok()) << image.error().message();
  // Not blank: a real share of non-white pixels, and the palette's colours.
  const int64_t h = image->dim(2), w = image->dim(3), plane = h * w;
  const float* d = image->data<float>();
  int64_t inked = 0;
  std::set<int> colours;
  for (int64_t i = 0; i < plane; ++i) {
    const int r = int((d[i] + 1) * 127.5f), g = int((d[plane + i] + 1) * 127.5f),
              b = int((d[2 * plane + i] + 1) * 127.5f);
    inked += r + g + b < 3 * 240;
    colours.insert((r / 16) * 256 + (g / 16) * 16 + b / 16);
  }
  EXPECT_EQ(w, 1200);
  EXPECT_GT(inked, plane / 50) << "the page rendered almost blank";
  EXPECT_GT(colours.size(), 12u) << "the plots' colours are missing";
  fs::remove_all(dir);
}

// The whole text-to-image pipeline: error of the final image against time per policy, with the
// LibTorch peer running the UNet's and the VAE's graphs on their own weights.
TEST(Tradeoff, WholeTextToImagePipeline) {
  const fs::path dir =
      fs::temp_directory_path() / ("tp_tradeoff_sdxl_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto r = twinpath(
      "tradeoff --model tiny-unet-xl --vae tiny-kl --pipeline sdxl.txt2img --steps 2 --res 64x64 "
      "--repeats 1 --policy w=f16,a=f16,acc=f32 --policy w=bf16,a=bf16,acc=f32 --out " +
      dir.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[1/"), std::string::npos) << r.output;
  if (TWINPATH_TEST_HAVE_TORCH)
    EXPECT_NE(r.output.find("3 of 3 policy x resolution points measured"), std::string::npos)
        << r.output;
  else
    EXPECT_NE(r.output.find("2 of 2 policy x resolution points measured"), std::string::npos)
        << r.output;
  EXPECT_TRUE(fs::exists(dir / "report.html"));
  const auto missing = twinpath(
      "tradeoff --model tiny-unet-xl --pipeline sdxl.txt2img --steps 2 "
      "--res 64x64 --repeats 1 --policy w=f16,a=f16,acc=f32 --out " +
      dir.string() + "/missing");
  EXPECT_NE(missing.output.find("decodes the latents with a VAE"), std::string::npos)
      << missing.output;
  fs::remove_all(dir);
}

TEST(Tradeoff, WrongInputsGetOneSentence) {
  const fs::path out =
      fs::temp_directory_path() / ("tp_tradeoff_bad_" + std::to_string(::getpid()));
  struct Bad {
    std::string args, says;
  };
  for (const Bad& b :
       {Bad{"--model tiny-kl --res 64by64", "--res 64by64: expected res=HEIGHTxWIDTH"},
        Bad{"--model /no/such/model", "/no/such/model is neither a built-in model"},
        Bad{"--model tiny-kl --pipeline vae.denoise", "--pipeline vae.denoise is unknown"},
        Bad{"--model tiny-kl --policy w=f16,x=1",
            "field 'x=1' is unknown; use w=, a=, acc=, scale=, sat=, clip=, attn= and cast="},
        Bad{"--model tiny-kl --repeats 0", "--repeats must be at least 1"},
        Bad{"--model tiny-kl --res 512x512 --mem 64MiB",
            "over the memory budget of 64.00 MiB (--mem): refused before allocating"},
        Bad{"--model tiny-kl --mem 12x", "--mem 12x is not a size"}}) {
    const auto r = twinpath("tradeoff " + b.args + " --out " + out.string());
    EXPECT_EQ(r.code, 2) << b.args << ": " << r.output;
    EXPECT_NE(r.output.find(b.says), std::string::npos) << b.args << ": " << r.output;
    EXPECT_FALSE(fs::exists(out / "report.html")) << b.args;
  }
  fs::remove_all(out);
}

}  // namespace
}  // namespace tp
