// diffusers' layerwise casting and fp32 islands on WanTransformer3DModel (dit-facts 5, 10):
// which layers enable_layerwise_casting casts, which parameters from_pretrained keeps in fp32,
// how a plan stores them, and the configurations refused because PyTorch would hand a kernel
// mismatched dtypes (dit-facts 10.5, field report 3).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "compiled/planner.h"
#include "compiled/prepared_weights.h"
#include "harness/core/layerwise_casting.h"
#include "harness/models/model.h"
#include "harness/models/wan_transformer_3d/wan_config.h"

namespace tp {
namespace {

using compiled::DTypePolicy;
using compiled::parse_layer_policy;

std::string fixture() {
  return std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/golden-wan/tiny-wan";
}

class WanLayerwise : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = load_model(fixture());
    ASSERT_TRUE(m.ok()) << m.error().message();
    model_ = std::move(m).value();
    graph_ = model_.family().graphs(*model_.config).front();
  }

  DTypePolicy policy(const std::string& text) const {
    DTypePolicy p;
    p.base = parse_layer_policy(text).value();
    return p;
  }

  // The first refusal check_layerwise gives over the graph's ops in order, or "".
  std::string first_refusal(const DTypePolicy& p) const {
    for (const Op& op : graph_.ops)
      if (Status s = p.check_layerwise(graph_, op, p.base); !s.ok()) return s.error().message();
    return "";
  }

  Expected<std::unique_ptr<compiled::Plan>> plan(const DTypePolicy& p) {
    compiled::PlanRequest r{&graph_,
                            &model_.weights,
                            compiled::weights_identity(model_.weights),
                            {1, 16, 3, 9, 7},
                            p,
                            {},
                            "cpu-emulated",
                            {{1}, {1, 8, 32}}};
    return compiled::compile_plan(r, store_);
  }

  Model model_;
  Graph graph_;
  compiled::WeightStore store_;
};

// dit-facts 10.2: only the Linears inside the blocks, 10 per block.
TEST_F(WanLayerwise, CastsOnlyTheBlocksLinears) {
  const LayerwiseSkips skips = LayerwiseSkips::of(graph_, std::nullopt);
  std::set<std::string> cast;
  for (const Op& op : graph_.ops)
    if (is_matrix_op(op.kind) && !skips.skipping(op.name)) cast.insert(op.name);
  std::set<std::string> want;
  for (const char* b : {"blocks.0.", "blocks.1."})
    for (const char* l :
         {"attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0", "attn2.to_q", "attn2.to_k",
          "attn2.to_v", "attn2.to_out.0", "ffn.net.0.proj", "ffn.net.2"})
      want.insert(std::string(b) + l);
  EXPECT_EQ(cast, want);
  EXPECT_EQ(skips.skipping("patch_embedding").value_or(""), "patch_embed");
  EXPECT_EQ(skips.skipping("proj_out").value_or(""), "^proj_out$");
  EXPECT_EQ(skips.skipping("condition_embedder.time_proj").value_or(""), "condition_embedder");
}

// dit-facts 5: from_pretrained keeps the time embedder, every scale_shift_table and norm2's
// affine in fp32, nothing else.
TEST_F(WanLayerwise, KeepsDiffusersFp32Modules) {
  std::set<std::string> kept;
  for (const ParamSpec& p : graph_.params)
    if (kept_in_fp32(graph_, p.key)) kept.insert(p.key);
  std::set<std::string> want{"condition_embedder.time_embedder.linear_1.weight",
                             "condition_embedder.time_embedder.linear_1.bias",
                             "condition_embedder.time_embedder.linear_2.weight",
                             "condition_embedder.time_embedder.linear_2.bias", "scale_shift_table"};
  for (const char* b : {"blocks.0.", "blocks.1."})
    for (const char* k : {"scale_shift_table", "norm2.weight", "norm2.bias"})
      want.insert(std::string(b) + k);
  EXPECT_EQ(kept, want);
}

// The plan stores what diffusers holds: the modulation vectors and the time MLP's inner values
// in f32 under a bf16 policy, the cast layers in fp8 without a scale (bias too), the skipped
// ones in bf16, the kept ones in f32.
TEST_F(WanLayerwise, PlanStoresIslandsAndCastLayersAsDiffusers) {
  auto p = plan(policy("w=f8e4m3,a=bf16,acc=f32,cast=layerwise"));
  ASSERT_TRUE(p.ok()) << p.error().message();
  const compiled::Plan& pl = **p;
  auto stored = [&](const std::string& value) {
    for (const auto& [v, b] : pl.buffers)
      if (graph_.value_names[std::size_t(v)] == value) return b.dtype;
    ADD_FAILURE() << value << " is no buffer";
    return DType::kF64;
  };
  EXPECT_EQ(stored("blocks.0.shift_msa"), DType::kF32);
  EXPECT_EQ(stored("blocks.1.norm3.one_plus_scale"), DType::kF32);
  EXPECT_EQ(stored("condition_embedder.timesteps_proj"), DType::kF32);
  EXPECT_EQ(stored("condition_embedder.time_embedder.linear_2"), DType::kBF16);
  EXPECT_EQ(stored("blocks.0.ffn.residual"), DType::kBF16);
  auto param = [&](const std::string& key) { return pl.params.at(key); };
  EXPECT_EQ(param("blocks.0.attn1.to_q.weight")->storage, DType::kF8E4M3);
  EXPECT_EQ(param("blocks.0.attn1.to_q.bias")->storage, DType::kF8E4M3);
  for (float s : param("blocks.0.attn1.to_q.weight")->scales) EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(param("patch_embedding.weight")->storage, DType::kBF16);
  EXPECT_EQ(param("blocks.0.attn1.norm_q.weight")->storage, DType::kBF16);
  EXPECT_EQ(param("blocks.0.scale_shift_table")->storage, DType::kF32);
  EXPECT_EQ(param("condition_embedder.time_embedder.linear_1.weight")->storage, DType::kF32);
  EXPECT_EQ(param("blocks.1.norm2.bias")->storage, DType::kF32);
}

// Field report 3 on this family: the model loaded in fp8, the casting skipping patch_embedding,
// so its Conv3d would meet bf16 activations with fp8 weight and bias.
TEST_F(WanLayerwise, RefusesASkippedLayerLoadedInFp8) {
  DTypePolicy p = policy("w=f8e4m3,a=bf16,acc=f32,cast=layerwise");
  EXPECT_EQ(first_refusal(p), "");
  p.load = DType::kF8E4M3;
  const std::string why = first_refusal(p);
  EXPECT_EQ(why.rfind("patch_embedding: weights in f8e4m3 with activations in bf16 because the "
                      "model was loaded in f8e4m3",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find("conv3d's weight and bias"), std::string::npos) << why;
  EXPECT_NE(why.find("leave load= out"), std::string::npos) << why;
  auto refused = plan(p);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), why);
}

// dit-facts 10.5 C: a skip list of one's own that leaves the time embedder to the casting.
TEST_F(WanLayerwise, RefusesCastingAModuleTheModelKeepsInFp32) {
  DTypePolicy p = policy("w=f8e4m3,a=bf16,acc=f32,cast=layerwise");
  p.cast_skip = std::vector<std::string>{"*norm*"};
  const std::string why = first_refusal(p);
  EXPECT_EQ(why.rfind("condition_embedder.time_embedder.linear_1: weights in f8e4m3 with "
                      "activations in bf16 because cast-skip= casts this layer",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find("'time_embedder'"), std::string::npos) << why;
  p.cast_skip->push_back("*time_embedder*");
  EXPECT_EQ(first_refusal(p), "");
}

// fuse_qkv_projections(): to_qkv for a self-attention's three projections (one input), to_kv
// for a cross-attention's key and value (the text), nothing for the query of a cross-attention.
TEST_F(WanLayerwise, NamesTheLinearsFuseQkvProjectionsMakes) {
  std::map<std::string, std::string> fused;
  for (const Op& op : graph_.ops)
    if (auto f = fused_projection(graph_, op)) fused[op.name] = *f;
  std::map<std::string, std::string> want;
  for (const std::string b : {"blocks.0.", "blocks.1."}) {
    for (const char* l : {"to_q", "to_k", "to_v"}) want[b + "attn1." + l] = b + "attn1.to_qkv";
    for (const char* l : {"to_k", "to_v"}) want[b + "attn2." + l] = b + "attn2.to_kv";
  }
  EXPECT_EQ(fused, want);
}

// dit-facts 10.5 B: fused after the casting, the fused Linear is built from fp8 storage and
// nothing casts it up; fused before, it is cast like the rest and computes as the three did.
TEST_F(WanLayerwise, RefusesProjectionsFusedAfterTheCasting) {
  DTypePolicy p = policy("w=f8e4m3,a=bf16,acc=f32,cast=layerwise");
  p.fuse_qkv = QkvFusion::kBeforeCast;
  EXPECT_EQ(first_refusal(p), "");
  p.fuse_qkv = QkvFusion::kAfterCast;
  const std::string why = first_refusal(p);
  EXPECT_EQ(why.rfind("blocks.0.attn1.to_qkv: weights in f8e4m3 with activations in bf16 "
                      "because fuse_qkv_projections() ran after enable_layerwise_casting",
                      0),
            0u)
      << why;
  EXPECT_NE(why.find("fuse-qkv=before-cast"), std::string::npos) << why;
  auto refused = plan(p);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), why);
  p.cast_skip = std::vector<std::string>{"*attn1*", "*attn2*", "*time_embedder*"};
  EXPECT_EQ(first_refusal(p), "") << "a skipped attention is never fused from fp8";
}

}  // namespace
}  // namespace tp
