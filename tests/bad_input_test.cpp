// Bad input of any size ends in exit 2 and one sentence (issue 42): JSON nested 100,000 levels
// in each kind of file that holds JSON, numbers past double's range where a line or a file
// gives one, a .npy header padded to 60 KB, and names of 300 and 5,000 characters. Each class
// once crashed the binary (a stack overflow, an uncaught exception, a regex's recursion, a
// filesystem_error).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "harness/core/safetensors.h"
#include "harness/core/tensor.h"
#include "harness/core/untrusted_json.h"
#include "reports/h5_report.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/user_error.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::expect_user_error;
using testing::ScratchDir;
using testing::twinpath;

std::string deep_json(int levels) {
  return "{\"a\": " + std::string(std::size_t(levels), '[') +
         std::string(std::size_t(levels), ']') + "}";
}

// A safetensors file whose header is `header` exactly, and no data.
void write_raw_safetensors(const std::string& path, const std::string& header) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(char((n >> (8 * i)) & 0xff));
  out << header;
}

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_.emplace("bad_input");
    ASSERT_EQ(twinpath("model init --config tiny-kl --seed 1 --out " + p("kl")).code, 0);
  }
  static void TearDownTestSuite() { scratch_.reset(); }
  static std::string p(const std::string& name) { return scratch_->path(name); }
  static inline std::optional<ScratchDir> scratch_;
};

TEST(UntrustedJson, DepthAndExcerptsAreBounded) {
  auto deep = parse_untrusted_json(deep_json(100000), "x.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message().find("x.json nests deeper than 64 levels"), std::string::npos);
  // Brackets inside strings and comments do not count; 64 levels are fine.
  JsonReadOptions comments;
  comments.comments = true;
  EXPECT_TRUE(parse_untrusted_json("{\"s\": \"[[[[\" /* [[[[ */}", "y", comments).ok());
  EXPECT_TRUE(parse_untrusted_json(std::string(64, '[') + std::string(64, ']'), "z").ok());
  EXPECT_FALSE(parse_untrusted_json("{\"a\": ", "w").ok());
  nlohmann::json s = std::string(5000, 'x') + "\xff";
  EXPECT_EQ(json_excerpt(s), "\"" + std::string(40, 'x') + "...\"");
  EXPECT_EQ(json_excerpt(nlohmann::json::array({1, 2, 3})), "an array of 3");
  EXPECT_EQ(json_excerpt(nlohmann::json("a\xff")), "\"a\\xff\"");
  std::string ten_escapes;
  for (int i = 0; i < 10; ++i) ten_escapes += "\\x01";
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(30, '\x01'))), "\"" + ten_escapes + "...\"")
      << "cut after 40 characters of escapes, and marked";
}

// config.json, model init's --config, a safetensors header and a repro's config metadata.
TEST_F(BadInput, DeepJsonInEveryKindOfFileIsOneSentence) {
  fs::create_directories(p("deep-model"));
  fs::copy_file(p("kl/diffusion_pytorch_model.safetensors"),
                p("deep-model/diffusion_pytorch_model.safetensors"));
  std::ofstream(p("deep-model/config.json")) << deep_json(100000);
  std::ofstream(p("deep.json")) << deep_json(100000);
  expect_user_error("exec --model " + p("deep-model") +
                        " --pipeline vae.decode --input x.npy --output " + p("o.npy"),
                    "nests deeper than 64 levels");
  expect_user_error("model init --config " + p("deep.json") + " --out " + p("deep-init"),
                    "nests deeper than 64 levels");
  EXPECT_FALSE(fs::exists(p("deep-init")));
  write_raw_safetensors(p("deep.safetensors"), deep_json(100000));
  expect_user_error("exec --model " + p("kl") + " --pipeline vae.decode --input " +
                        p("deep.safetensors") + " --output " + p("o.npy"),
                    "nests deeper than 64 levels");
  write_raw_safetensors(p("repro.safetensors"),
                        R"({"__metadata__": {"twinpath_repro": "1", "config": ")" +
                            std::string(100000, '[') + std::string(100000, ']') + R"("}})");
  expect_user_error("replay " + p("repro.safetensors"), "nests deeper than 64 levels");
  EXPECT_FALSE(fs::exists(p("o.npy")));
}

// Numbers past double's range, and past int's, where a case line or a flag gives one.
TEST_F(BadInput, NumbersPastTheirRangeAreOneSentence) {
  for (const char* sigma : {"1e400", "1e-400", "nan", "inf", "0x1p9999"})
    expect_user_error(
        "run --case 'vae.decode model=tiny-kl res=64x64 w=f32 a=f32 acc=f32 "
        "input=normal*" +
            std::string(sigma) + "' --report " + p("r.h5"),
        "input=normal*");
  expect_user_error("run --suite ci --jobs 99999999999999999999 --report " + p("r.h5"), "--jobs");
  expect_user_error(
      "model init --config tiny-kl --out " + p("s") + " --scale-layer decoder.conv_in*1e999",
      "is not LAYER*FACTOR");
  EXPECT_FALSE(fs::exists(p("r.h5")));
}

// A layer named by its module where the weights sit one level down (HunyuanVideo's causal convs
// hold their Conv3d as `.conv`), or not at all: the sentence names layers this model has.
TEST_F(BadInput, ALayerWithoutWeightsIsAnsweredWithTheModelsOwnLayers) {
  expect_user_error("model init --config tiny-hv --out " + p("hv") +
                        " --scale-layer 'decoder.mid_block.resnets.0.conv1*3000'",
                    "the model has no layer 'decoder.mid_block.resnets.0.conv1' with weights; the "
                    "layers with weights below it: decoder.mid_block.resnets.0.conv1.conv");
  expect_user_error(
      "model init --config tiny-hv --out " + p("hv") + " --scale-layer 'decoder.up_blocks.9*2'",
      "name it by its diffusers path, e.g. decoder.");
  EXPECT_FALSE(fs::exists(p("hv")));
}

// A .npy header padded with 60 KB of spaces (numpy pads to 64 bytes; nothing forbids more) is
// read as any other; it crashed a regex-based header parser.
TEST_F(BadInput, ANpyHeaderOf60KbOfPaddingIsRead) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 8, 8), }";
  header += std::string(60000, ' ') + "\n";
  std::ofstream out(p("padded.npy"), std::ios::binary);
  out << "\x93NUMPY" << char(2) << char(0);
  const uint32_t n = uint32_t(header.size());
  for (int i = 0; i < 4; ++i) out.put(char((n >> (8 * i)) & 0xff));
  out << header << std::string(4 * 256, '\0');
  out.close();
  const auto r = twinpath("exec --model " + p("kl") + " --pipeline vae.decode --input " +
                          p("padded.npy") + " --output " + p("padded-out.npy"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(p("padded-out.npy")));
}

// Names of 300 and 5,000 characters: a model, a config, a case line's model=.
TEST_F(BadInput, NamesPastTheSystemsLimitAreOneSentence) {
  for (std::size_t n : {std::size_t(300), std::size_t(5000)}) {
    const std::string name(n, 'm');
    const std::string limit = "the system allows 255 characters a name";
    expect_user_error(
        "exec --model " + name + " --pipeline vae.decode --input x --output " + p("o.npy"), limit);
    expect_user_error("model init --config " + name + " --out " + p("long"),
                      "unknown built-in config 'mmmm");
    expect_user_error("run --case 'vae.decode model=" + name +
                          " res=64x64 w=f32 a=f32 acc=f32' --report " + p("r.h5"),
                      "is neither a built-in model");
  }
  EXPECT_FALSE(fs::exists(p("long")));
}

// A repro file (`triage --repro`) damaged or hand-edited: a weight missing, short, empty or in
// the wrong shape, a value of the group missing or in the wrong shape, a tensor that is neither.
// Each is refused before any kernel runs; a null weight once reached the conv kernel (a
// segmentation fault) and a wrong size an internal check (exit 3).
TEST_F(BadInput, DamagedReprosAreRefusedBeforeAnyKernelRuns) {
  const std::string layer = "decoder.up_blocks.0.resnets.0.conv1";
  ASSERT_EQ(twinpath("model init --config tiny-kl --seed 4 --scale-layer '" + layer +
                     "*1e5' --out " + p("hot"))
                .code,
            0);
  Tensor latent(DType::kF32, {1, 4, 8, 8});
  for (int64_t i = 0; i < latent.numel(); ++i) latent.data<float>()[i] = float(i % 7) / 7.0f;
  ASSERT_TRUE(write_safetensors(p("latent.safetensors"), {{"latents", latent}}).ok());
  ASSERT_EQ(twinpath("triage --model " + p("hot") + " --pipeline vae.decode --input " +
                     p("latent.safetensors") + " --policy w=f16,a=f16,acc=f32 --repro " +
                     p("good.safetensors"))
                .code,
            1);
  ASSERT_EQ(twinpath("replay " + p("good.safetensors")).code, 1) << "the undamaged repro runs";
  auto good = SafetensorsFile::open(p("good.safetensors"));
  ASSERT_TRUE(good.ok());
  NamedTensors tensors;
  for (const SafetensorsEntry& e : good->entries()) tensors.emplace_back(e.name, *good->read(e));
  const auto first = [&](const char* prefix) {
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].first.rfind(prefix, 0) == 0) return i;
    return tensors.size();
  };
  const std::size_t weight = first("weight/"), value = first("value/");
  ASSERT_LT(weight, tensors.size());
  ASSERT_LT(value, tensors.size());
  struct Damage {
    const char* name;
    std::function<void(NamedTensors&)> apply;
    const char* says;
  };
  const Damage damages[] = {
      {"short weight", [&](NamedTensors& t) { t[weight].second = Tensor(DType::kF32, {1}); },
       "has shape [1], but"},
      {"empty weight", [&](NamedTensors& t) { t[weight].second = Tensor(DType::kF32, {0}); },
       "has shape [0], but"},
      {"missing value", [&](NamedTensors& t) { t.erase(t.begin() + long(value)); },
       "which the repro does not hold"},
      {"value of another shape",
       [&](NamedTensors& t) {
         t[value].second = Tensor(DType::kF32, {1, 2, 3});
       },
       "but the group reads it as"},
      {"negative value id", [&](NamedTensors& t) { t[value].first = "value/-3"; },
       "nor a value/ID of one of its"},
      {"stranger", [&](NamedTensors& t) { t.emplace_back("bias", Tensor(DType::kF32, {2})); },
       "is neither a weight/"},
  };
  for (const Damage& d : damages) {
    NamedTensors damaged = tensors;
    d.apply(damaged);
    ASSERT_TRUE(write_safetensors(p("bad.safetensors"), damaged, good->metadata()).ok());
    SCOPED_TRACE(d.name);
    expect_user_error("replay " + p("bad.safetensors"), d.says);
  }
}

// A report whose strings hold bytes that are not UTF-8 (a damaged or hand-made file): the reader
// replaces each invalid byte with U+FFFD, so `report show` prints text and JSON that parses,
// where the JSON printer used to abort.
TEST_F(BadInput, ReportStringsThatAreNotUtf8ArePrinted) {
  CaseResult c;
  c.id = "vae.decode model=tiny-kl \xff\xfe res=64x64";
  c.outcome = Outcome::kFailed;
  c.reason = "broken \xc3\x28 here";
  c.repro = "twinpath run --case '\x80'";
  CheckpointRecord r;
  r.name = "decoder.\xff";
  r.op_class = "conv";
  r.dtype = "f16";
  r.tolerance_basis = "\xe2\x82";
  c.checkpoints = {r};
  RunReport report;
  report.cases = {c};
  ASSERT_TRUE(write_h5_report(p("utf8.h5"), report).ok());
  const auto text = twinpath("report show " + p("utf8.h5"));
  EXPECT_EQ(text.code, 1) << text.output;  // the report holds a failed case
  EXPECT_EQ(text.output.find('\xff'), std::string::npos) << "read as U+FFFD, printed so";
  EXPECT_NE(text.output.find("tiny-kl \xef\xbf\xbd\xef\xbf\xbd res"), std::string::npos)
      << text.output;
  const auto json = twinpath("report show --json " + p("utf8.h5") + " 2>/dev/null");
  EXPECT_EQ(json.code, 1) << json.output;
  const nlohmann::json j = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.output;
  EXPECT_NE(json.output.find("\xef\xbf\xbd"), std::string::npos) << "U+FFFD in place of 0xff";
}

}  // namespace
}  // namespace tp
