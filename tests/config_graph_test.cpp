// Configs with diffusers' defaults, the graphs' parameter lists against the published key
// listings and parameter counts, and checkpoint matching (legacy names, mismatches).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/models/autoencoder_kl/kl_config.h"
#include "harness/models/autoencoder_tiny/tiny_config.h"
#include "harness/models/model.h"
#include "harness/models/vae/vae_graphs.h"

namespace tp {
namespace {

// A VAE config through the registry, as a model folder's is parsed.
std::shared_ptr<const VaeConfig> parse(const std::string& text) {
  auto c = parse_model_config(nlohmann::json::parse(text), "test");
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
  if (!c.ok()) return parse(R"({"_class_name": "AutoencoderKL"})");
  return std::dynamic_pointer_cast<const VaeConfig>(*c);
}

std::shared_ptr<const VaeConfig> builtin(const std::string& name) {
  return parse(builtin_config_text(name).value());
}

KlConfig kl_of(const std::shared_ptr<const VaeConfig>& c) {
  return dynamic_cast<const KlVaeConfig&>(*c).kl;
}

// Lines "key   [a, b, c]" of the key lists generated from diffusers (tests/fixtures/keys).
std::vector<ParamSpec> read_key_listing(const std::string& file) {
  std::ifstream in(std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/keys/" + file);
  std::vector<ParamSpec> specs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ParamSpec s;
    std::istringstream is(line);
    is >> s.key;
    std::string rest;
    std::getline(is, rest);
    for (char& c : rest)
      if (c == '[' || c == ']' || c == ',') c = ' ';
    std::istringstream dims(rest);
    for (int64_t d; dims >> d;) s.shape.push_back(d);
    specs.push_back(s);
  }
  return specs;
}

int64_t count_params(const std::vector<ParamSpec>& specs, const std::string& prefix_a,
                     const std::string& prefix_b) {
  int64_t n = 0;
  for (const auto& s : specs)
    if (s.key.rfind(prefix_a, 0) == 0 || s.key.rfind(prefix_b, 0) == 0) n += shape_numel(s.shape);
  return n;
}

void expect_same_specs(std::vector<ParamSpec> ours, std::vector<ParamSpec> listed) {
  auto by_key = [](const ParamSpec& a, const ParamSpec& b) { return a.key < b.key; };
  std::sort(ours.begin(), ours.end(), by_key);
  std::sort(listed.begin(), listed.end(), by_key);
  ASSERT_EQ(ours.size(), listed.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].key, listed[i].key);
    EXPECT_EQ(ours[i].shape, listed[i].shape) << ours[i].key;
  }
}

TEST(Config, DefaultsForMissingFields) {
  const KlConfig c = kl_of(parse(R"({"_class_name": "AutoencoderKL"})"));
  EXPECT_EQ(c.block_out_channels, std::vector<int>{64});
  EXPECT_EQ(c.layers_per_block, 1);
  EXPECT_EQ(c.norm_num_groups, 32);
  EXPECT_DOUBLE_EQ(c.scaling_factor, 0.18215);
  EXPECT_TRUE(c.force_upcast && c.use_quant_conv && c.use_post_quant_conv &&
              c.mid_block_add_attention);
  EXPECT_FALSE(c.shift_factor.has_value());
  const TinyConfig t =
      dynamic_cast<const TinyVaeConfig&>(*parse(R"({"_class_name": "AutoencoderTiny"})")).tiny;
  EXPECT_EQ(t.num_encoder_blocks, (std::vector<int>{1, 3, 3, 3}));
  EXPECT_EQ(t.num_decoder_blocks, (std::vector<int>{3, 3, 3, 1}));
  EXPECT_DOUBLE_EQ(t.latent_magnitude, 3);
  // sdxl-vae-fp16-fix: same architecture, sample_size 512, force_upcast false.
  const KlConfig fix =
      kl_of(parse(R"({"_class_name": "AutoencoderKL", "block_out_channels": [128, 256, 512, 512],
      "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
      "layers_per_block": 2, "sample_size": [512, 512], "force_upcast": false, "scaling_factor": 0.13025})"));
  EXPECT_EQ(fix.sample_size, 512);
  EXPECT_FALSE(fix.force_upcast);
}

TEST(Config, RefusesWhatItCannotBuild) {
  auto expect_error = [](const std::string& text, const std::string& fragment) {
    auto c = parse_model_config(nlohmann::json::parse(text), "cfg.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.error().message().find(fragment), std::string::npos) << c.error().message();
  };
  expect_error(R"({"_class_name": "AutoencoderKL", "act_fn": "gelu"})", "act_fn 'gelu'");
  expect_error(R"({"_class_name": "AutoencoderKL", "block_out_channels": [48]})",
               "not a positive multiple of norm_num_groups");
  expect_error(
      R"({"_class_name": "AutoencoderKL", "block_out_channels": [64, 64], "down_block_types": ["DownEncoderBlock2D"]})",
      "one per block_out_channels");
  expect_error(R"({"_class_name": "AutoencoderKL", "layers_per_block": "two"})",
               "'layers_per_block' has the wrong type");
  expect_error(R"({"_class_name": "AutoencoderKLWan"})", "'AutoencoderKLWan' is not supported");
  expect_error(
      R"({"_class_name": "AutoencoderTiny", "encoder_block_out_channels": [64, 32, 64, 64]})",
      "must all be equal");
  // Damaged files: sizes no model has, which would take minutes or all memory to build, and
  // numbers an int cannot hold (found by fuzzing: docs/fuzzing.md).
  expect_error(R"({"_class_name": "AutoencoderKL", "layers_per_block": 100})", "up to 64 layers");
  expect_error(R"({"_class_name": "AutoencoderKL", "norm_num_groups": 0})",
               "with at least one group");
  expect_error(R"({"_class_name": "AutoencoderKL", "latent_channels": 4294967300})",
               "larger than any diffusers model's");
  expect_error(R"({"_class_name": "AutoencoderKL", "latent_channels": 4.5})",
               "'latent_channels' has the wrong type or is out of range");
  expect_error(R"({"_class_name": "AutoencoderTiny", "num_decoder_blocks": [3, 3, 3, 1000]})",
               "must be 0 to 64");
}

TEST(Config, RefusesSizesNoDiffusersModelHas) {
  for (const char* text :
       {R"({"_class_name": "AutoencoderKL", "block_out_channels": [128, 2000000000]})",
        R"({"_class_name": "UNet2DConditionModel", "cross_attention_dim": 100000})"}) {
    auto c = parse_model_config(nlohmann::json::parse(text), "cfg.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.error().message().find("larger than any diffusers model's; the config is damaged"),
              std::string::npos)
        << c.error().message();
  }
  auto deep = parse_model_config(
      nlohmann::json::parse(R"({"_class_name": "UNet2DConditionModel", "layers_per_block": 1000})"),
      "cfg.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message().find("must be at most 64"), std::string::npos)
      << deep.error().message();
}

TEST(Graph, SdVaeKeysMatchTheReferenceListing) {
  const std::vector<ParamSpec> specs = model_param_specs(*builtin("sd-kl"));
  expect_same_specs(specs, read_key_listing("sd-vae-keys.txt"));
  // Published counts (TAESD README, vae-facts.md section 8).
  EXPECT_EQ(count_params(specs, "decoder.", "decoder."), 49'490'179);
  EXPECT_EQ(count_params(specs, "encoder.", "encoder."), 34'163'592);
  EXPECT_EQ(count_params(specs, "", ""), 83'653'863);
}

TEST(Graph, TaesdKeysMatchTheReferenceListing) {
  const std::vector<ParamSpec> specs =
      model_param_specs(*parse(R"({"_class_name": "AutoencoderTiny"})"));
  expect_same_specs(specs, read_key_listing("taesd-keys.txt"));
  EXPECT_EQ(count_params(specs, "decoder.", "decoder."), 1'222'531);
  EXPECT_EQ(count_params(specs, "encoder.", "encoder."), 1'222'532);
}

// The UNet family through the registry: parameter lists against diffusers' state dicts
// (generated listings), and counts measured in diffusers 0.42.1 (unet-facts 1.2 and 10).
std::vector<ParamSpec> unet_specs(const std::string& builtin_name) {
  auto config = parse_model_config(nlohmann::json::parse(builtin_config_text(builtin_name).value()),
                                   builtin_name);
  EXPECT_TRUE(config.ok()) << (config.ok() ? "" : config.error().message());
  return config.ok() ? (*config)->family().param_specs(**config) : std::vector<ParamSpec>{};
}

TEST(Graph, UnetKeysMatchDiffusersStateDicts) {
  expect_same_specs(unet_specs("sd15-unet"), read_key_listing("sd15-unet-keys.txt"));
  expect_same_specs(unet_specs("sdxl-base"), read_key_listing("sdxl-unet-keys.txt"));
  const std::pair<const char*, std::pair<std::size_t, int64_t>> counts[] = {
      {"tiny-unet", {494, 141'628}},           {"tiny-unet-xl", {428, 502'372}},
      {"sd15-unet", {686, 859'520'964}},       {"sdxl-base", {1680, 2'567'463'684}},
      {"sdxl-refiner", {1220, 2'259'526'660}},
  };
  for (const auto& [name, want] : counts) {
    const std::vector<ParamSpec> specs = unet_specs(name);
    EXPECT_EQ(specs.size(), want.first) << name;
    EXPECT_EQ(count_params(specs, "", ""), want.second) << name;
  }
}

TEST(Config, UnetRefusesWhatItCannotBuildNamingTheField) {
  auto refuse = [](const std::string& text) {
    auto c = parse_model_config(nlohmann::json::parse(text), "unet.json");
    return c.ok() ? std::string("accepted") : c.error().message();
  };
  const std::string base = R"({"_class_name": "UNet2DConditionModel", "block_out_channels": [8, 16],
    "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"], "norm_num_groups": 4,
    "attention_head_dim": 2, "cross_attention_dim": 8)";
  EXPECT_EQ(refuse(base + "}"), "accepted");
  EXPECT_EQ(refuse(base + R"(, "num_attention_heads": 2})"),
            "unet.json: num_attention_heads is set; diffusers refuses it for "
            "UNet2DConditionModel (the heads are attention_head_dim)");
  EXPECT_NE(refuse(base + R"(, "down_block_types": ["SimpleCrossAttnDownBlock2D", "DownBlock2D"]})")
                .find("down block type 'SimpleCrossAttnDownBlock2D' is not supported"),
            std::string::npos);
  EXPECT_NE(refuse(base + R"(, "attention_head_dim": 3})").find("does not divide"),
            std::string::npos);
  EXPECT_NE(refuse(base + R"(, "layers_per_block": [1, 2, 3]})")
                .find("'layers_per_block' lists 3 entries; it needs one per block (2)"),
            std::string::npos);
  EXPECT_NE(refuse(base + R"(, "class_embed_type": "timestep"})")
                .find("class_embed_type \"timestep\" is not supported"),
            std::string::npos);
  EXPECT_NE(refuse(base + R"(, "addition_embed_type": "text_time"})")
                .find("text_time needs addition_time_embed_dim"),
            std::string::npos);
}

TEST(Graph, NamesAreDiffusersModulePaths) {
  const Graph g = build_decoder_graph(*builtin("sd-kl"));
  std::set<std::string> names;
  for (const Op& op : g.ops)
    EXPECT_TRUE(names.insert(op.name).second) << "duplicate op " << op.name;
  for (const char* n : {"post_quant_conv", "decoder.conv_in", "decoder.mid_block.attentions.0.to_q",
                        "decoder.up_blocks.2.resnets.0.conv_shortcut",
                        "decoder.up_blocks.0.upsamplers.0.conv", "decoder.conv_out"})
    EXPECT_TRUE(names.count(n)) << n;
  std::set<std::string> modules;
  for (const auto& [m, v] : g.modules) modules.insert(m);
  for (const char* m : {"decoder.mid_block", "decoder.up_blocks.2.resnets.1",
                        "decoder.mid_block.attentions.0", "decoder.up_blocks.1", "decoder"})
    EXPECT_TRUE(modules.count(m)) << m;
  // The hash follows the structure: equal for equal configs, different otherwise.
  EXPECT_EQ(g.hash(), build_decoder_graph(*builtin("sdxl-kl")).hash());
  EXPECT_NE(g.hash(), build_decoder_graph(*builtin("tiny-kl")).hash());
  EXPECT_NE(g.hash(), build_encoder_graph(*builtin("sd-kl")).hash());
  // Without mid-block attention there is no attention op.
  KlVaeConfig no_attn = dynamic_cast<const KlVaeConfig&>(*builtin("tiny-kl"));
  no_attn.kl.mid_block_add_attention = false;
  for (const Op& op : build_encoder_graph(no_attn).ops)
    EXPECT_NE(op.kind, OpKind::kMultiHeadAttention);
  EXPECT_EQ(image_attentions(build_encoder_graph(*builtin("tiny-kl"))).size(), 1u);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tp_ck_" + std::to_string(::getpid()));
    ASSERT_TRUE(init_model("tiny-kl", 5, dir_.string()).ok());
    weights_path_ = (dir_ / "diffusion_pytorch_model.safetensors").string();
    auto f = SafetensorsFile::open(weights_path_);
    ASSERT_TRUE(f.ok());
    for (const auto& e : f->entries()) tensors_.emplace_back(e.name, f->read(e).value());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::string weights_path_;
  NamedTensors tensors_;
};

TEST_F(CheckpointTest, AcceptsLegacyAttentionNamesAndConvShapedWeights) {
  NamedTensors legacy;
  for (auto [name, t] : tensors_) {
    for (auto [from, to] : {std::pair{".to_q.", ".query."},
                            {".to_k.", ".key."},
                            {".to_v.", ".value."},
                            {".to_out.0.", ".proj_attn."}})
      if (auto at = name.find(from); at != std::string::npos)
        name = name.replace(at, std::strlen(from), to);
    if (name.find(".attentions.") != std::string::npos && t.rank() == 2)
      t = t.reshaped({t.dim(0), t.dim(1), 1, 1});
    legacy.emplace_back(name, t);
  }
  ASSERT_TRUE(write_safetensors(weights_path_, legacy).ok());
  auto m = load_model(dir_.string());
  ASSERT_TRUE(m.ok()) << m.error().message();
  const Tensor& q = m->weights.at("encoder.mid_block.attentions.0.to_q.weight");
  EXPECT_EQ(q.rank(), 2);
  EXPECT_EQ(modern_attention_key("decoder.mid_block.attentions.0.proj_attn.bias"),
            "decoder.mid_block.attentions.0.to_out.0.bias");
  EXPECT_EQ(modern_attention_key("decoder.conv_in.weight"), "decoder.conv_in.weight");
}

TEST_F(CheckpointTest, MismatchListsEveryDifference) {
  NamedTensors bad;
  for (auto& [name, t] : tensors_) {
    if (name == "decoder.conv_in.bias") continue;                                 // missing
    if (name == "encoder.conv_in.weight") t = Tensor(DType::kF32, {7, 3, 3, 3});  // wrong shape
    bad.emplace_back(name, t);
  }
  bad.emplace_back("decoder.extra.weight", Tensor(DType::kF32, {2}));  // unexpected
  ASSERT_TRUE(write_safetensors(weights_path_, bad).ok());
  auto m = load_model(dir_.string());
  ASSERT_FALSE(m.ok());
  const std::string& msg = m.error().message();
  EXPECT_NE(msg.find("1 missing:\n    decoder.conv_in.bias [32]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 unexpected:\n    decoder.extra.weight [2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("encoder.conv_in.weight: file has [7, 3, 3, 3], config needs [16, 3, 3, 3]"),
            std::string::npos)
      << msg;
}

TEST_F(CheckpointTest, MissingFilesSayWhatToDo) {
  std::filesystem::remove(weights_path_);
  auto m = load_model(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("missing model weights"), std::string::npos);
  auto none = load_model((dir_ / "nope").string());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("twinpath model init"), std::string::npos);
}

// A sharded checkpoint (diffusers' index file and its shards) loads as the single file does; a
// shard missing, a key in the wrong shard or a damaged index gets one sentence.
TEST_F(CheckpointTest, ShardedCheckpointsLoadAsTheSingleFile) {
  const auto whole = load_model(dir_.string());
  ASSERT_TRUE(whole.ok());
  std::filesystem::remove(weights_path_);
  NamedTensors first(tensors_.begin(), tensors_.begin() + long(tensors_.size() / 2)),
      second(tensors_.begin() + long(tensors_.size() / 2), tensors_.end());
  const std::string a = "diffusion_pytorch_model-00001-of-00002.safetensors",
                    b = "diffusion_pytorch_model-00002-of-00002.safetensors";
  ASSERT_TRUE(write_safetensors((dir_ / a).string(), first).ok());
  ASSERT_TRUE(write_safetensors((dir_ / b).string(), second).ok());
  nlohmann::json index;
  index["metadata"] = {{"total_size", 0}};
  for (const auto& [name, t] : first) index["weight_map"][name] = a;
  for (const auto& [name, t] : second) index["weight_map"][name] = b;
  const auto index_path = dir_ / "diffusion_pytorch_model.safetensors.index.json";
  std::ofstream(index_path) << index.dump();
  const auto sharded = load_model(dir_.string());
  ASSERT_TRUE(sharded.ok()) << sharded.error().message();
  ASSERT_EQ(sharded->weights.size(), whole->weights.size());
  for (const auto& [key, t] : whole->weights)
    EXPECT_EQ(std::memcmp(t.raw(), sharded->weights.at(key).raw(), t.nbytes()), 0) << key;

  auto refused = [&](const nlohmann::json& damaged, const std::string& fragment) {
    std::ofstream(index_path) << damaged.dump();
    const auto m = load_model(dir_.string());
    ASSERT_FALSE(m.ok()) << fragment;
    EXPECT_NE(m.error().message().find(fragment), std::string::npos) << m.error().message();
  };
  nlohmann::json moved = index;
  moved["weight_map"][first.front().first] = b;
  refused(moved, "puts " + first.front().first + " in " + b + ", which does not hold it");
  nlohmann::json escaping = index;
  escaping["weight_map"][first.front().first] = "../elsewhere.safetensors";
  refused(escaping, "a shard that is not a file name beside the index");
  refused(nlohmann::json::array(), "not a safetensors index");
  std::filesystem::remove(dir_ / b);
  refused(index, "names the shard " + b + ", which is not in");
}

TEST_F(CheckpointTest, InitIsSeeded) {
  const auto other = dir_ / "again";
  ASSERT_TRUE(init_model("tiny-kl", 5, other.string()).ok());
  auto a = load_model(dir_.string()), b = load_model(other.string());
  ASSERT_TRUE(a.ok() && b.ok());
  const Tensor& wa = a->weights.at("decoder.conv_out.weight");
  const Tensor& wb = b->weights.at("decoder.conv_out.weight");
  EXPECT_EQ(std::memcmp(wa.raw(), wb.raw(), wa.nbytes()), 0);
  const auto third = dir_ / "seed6";
  ASSERT_TRUE(init_model("tiny-kl", 6, third.string()).ok());
  auto c = load_model(third.string());
  ASSERT_TRUE(c.ok());
  EXPECT_NE(std::memcmp(wa.raw(), c->weights.at("decoder.conv_out.weight").raw(), wa.nbytes()), 0);
}

}  // namespace
}  // namespace tp

namespace tp {
namespace {

// weights=ties: every matrix row's largest |w| is 1.75 * 2^m (so an fp8 scale of max|w| / 448 is
// a power of two) and every weight has at most 5 significant bits; vectors are left alone.
TEST(TieProneWeights, RowsPeakAtAPowerOfTwoTimesSevenQuartersWithFiveBits) {
  auto made = make_model("tiny-kl", 1);
  ASSERT_TRUE(made.ok());
  Model m = std::move(made).value();
  const Weights before = m.weights;
  make_weights_tie_prone(m);
  int matrices = 0;
  for (const auto& [key, t] : m.weights) {
    const Tensor w = t.to(DType::kF64);
    if (t.rank() < 2) {
      EXPECT_EQ(std::memcmp(t.raw(), before.at(key).raw(), t.nbytes()), 0) << key;
      continue;
    }
    ++matrices;
    const int64_t rows = t.dim(0), per_row = t.numel() / rows;
    for (int64_t r = 0; r < rows; ++r) {
      double amax = 0;
      for (int64_t i = 0; i < per_row; ++i) {
        const double v = w.data<double>()[r * per_row + i];
        amax = std::max(amax, std::fabs(v));
        int e = 0;
        const double mant = std::frexp(v, &e);
        EXPECT_EQ(mant * 32, std::nearbyint(mant * 32)) << key << " has more than 5 bits";
      }
      int e = 0;
      EXPECT_EQ(std::frexp(amax, &e), 0.875) << key << " row " << r;
    }
  }
  EXPECT_GT(matrices, 10);
}

}  // namespace
}  // namespace tp
