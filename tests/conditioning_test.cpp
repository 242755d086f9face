// The local rule's conditioning factors measured on the reference: a conv's or linear's
// (matrix_conditioning), a LayerNorm's (layer_norm_conditioning), and the drawn configs whose
// cancelling conv and whose 2-channel LayerNorm needed them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "harness/core/graph.h"
#include "harness/runner/case_runner.h"
#include "harness/runner/matrix_conditioning.h"
#include "harness/runner/tolerance.h"
#include "tests/support/case_line.h"

namespace tp {
namespace {

// y = x W^T over x's last dim, no bias: the graph and its one weight.
struct Linear {
  Graph graph;
  Weights weights;
  Linear(const std::vector<float>& w) {
    GraphBuilder b("linear");
    const int x = b.input("x");
    b.output("y", b.linear_last("proj", x, int64_t(w.size()), 1, false));
    graph = b.finish();
    Tensor t(DType::kF32, {1, int64_t(w.size())});
    std::copy(w.begin(), w.end(), t.data<float>());
    weights.emplace(graph.params.at(0).key, t);
  }
  double conditioning(const std::vector<float>& values) const {
    Tensor x(DType::kF32, {1, 1, int64_t(values.size())});
    std::copy(values.begin(), values.end(), x.data<float>());
    auto k = matrix_conditioning(graph, 0, weights, x);
    if (!k.ok()) throw std::runtime_error(k.error().message());
    return *k;
  }
};

TEST(MatrixConditioning, IsTheTermsSizeOverTheSums) {
  // 1 - 1.001: a sum of -0.001 from terms of size sqrt(1 + 1.001^2).
  const Linear diff({1, -1});
  EXPECT_NEAR(diff.conditioning({1, 1.001f}), std::sqrt(1 + 1.001f * 1.001f) / 0.001f, 0.5);
  // Terms of one sign do not cancel: sqrt(sum a^2) <= sum a.
  const Linear sum({1, 2, 3});
  EXPECT_LE(sum.conditioning({1, 1, 1}), 1.0);
  // A zero output: nothing to measure against.
  EXPECT_EQ(diff.conditioning({2, 2}), 1.0);
}

// A linear inside a fused group reads a value the run never captured (a feed-forward's
// projection after its norm): the group's ops before it run on the reference from its inputs.
TEST(MatrixConditioning, OfALinearWhoseInputIsInsideTheGroup) {
  GraphBuilder b("group");
  const int x = b.input("x");
  const int doubled = b.binary("double", BinaryOp::kAdd, x, x);
  b.output("y", b.linear_last("proj", doubled, 2, 1, false));
  const Graph g = b.finish();
  Tensor w(DType::kF32, {1, 2}), in(DType::kF32, {1, 1, 2});
  w.data<float>()[0] = 1;
  w.data<float>()[1] = -1;
  in.data<float>()[0] = 1;
  in.data<float>()[1] = 1.001f;
  const Weights weights{{g.params.at(0).key, w}};
  // 2 - 2.002: a sum of -0.002 from terms of size sqrt(4 + 2.002^2).
  EXPECT_NEAR(group_conditioning(g, {0, 1}, weights, {{x, in}}).matrix,
              std::sqrt(1 + 1.001f * 1.001f) / (1.001f - 1), 0.5);
  EXPECT_EQ(group_conditioning(g, {0, 1}, weights, {}).matrix, 1.0);  // nothing to run it from
}

TEST(MatrixConditioning, ScalesTheLocalBoundAndNamesIt) {
  ValuePath path{{DType::kF16}, DType::kF32, 54, DType::kF32};
  const Tolerance plain = local_tolerance(OpClass::kConv, path);
  path.matrix_conditioning = 4.5;
  const Tolerance conditioned = local_tolerance(OpClass::kConv, path);
  EXPECT_NEAR(conditioned.rel_l2, 4.5 * plain.rel_l2, 1e-15);
  EXPECT_NE(conditioned.basis.find("x conv conditioning 4.5"), std::string::npos)
      << conditioned.basis;
}

// Drawn HunyuanVideo VAE 6: decoder.up_blocks.1.resnets.1.conv1's sums cancel (conditioning
// about 4.5), and its correct f16 local error, 1.73e-3, passed the plain 3 u + sum bound
// (1.47e-3). Judged with the conditioning, the case passes and the record names it.
TEST(MatrixConditioning, ACancellingConvOfADrawnVideoVaeIsJudgedWithIt) {
  ModelCache models;
  const CaseResult r =
      run_case(testing::case_of("video.roundtrip model=random:autoencoder_kl_hunyuan_video:6 "
                                "res=32x48 w=f16 a=f16 acc=f32 "
                                "frames=5"),
               RunOptions{}, models);
  ASSERT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  const ValuePath plain{{DType::kF16}, DType::kF32, 54, DType::kF32};
  bool found = false;
  for (const CheckpointRecord& rec : r.checkpoints) {
    if (rec.name != "decoder.up_blocks.1.resnets.1.conv1") continue;
    found = true;
    EXPECT_GT(rec.local.rel_l2, local_tolerance(OpClass::kConv, plain).rel_l2);
    EXPECT_NE(rec.tolerance_basis.find("conv conditioning"), std::string::npos)
        << rec.tolerance_basis;
  }
  EXPECT_TRUE(found);
}

// A LayerNorm row's rms over its spread: sqrt(E[x^2] / Var[x]) averaged (as squares) over rows.
TEST(LayerNormConditioning, IsTheRowsRmsOverTheirSpread) {
  Tensor x(DType::kF32, {1, 2, 2});
  const float values[] = {1, 1.001f, -3, 3};  // a row of two nearly equal values; a zero mean
  std::copy(std::begin(values), std::end(values), x.data<float>());
  const double mean = (1 + double(1.001f)) / 2, spread = (double(1.001f) - 1) / 2;
  const double nearly_equal = (mean * mean + spread * spread) / (spread * spread);
  EXPECT_NEAR(layer_norm_conditioning(x, 1, 0), std::sqrt((nearly_equal + 1) / 2),
              1e-6 * std::sqrt(nearly_equal));
  double m = 0, m2 = 0;  // over the last 2 dims: one row of all four
  for (float v : values) m += v / 4.0, m2 += double(v) * v / 4.0;
  EXPECT_NEAR(layer_norm_conditioning(x, 2, 0), std::sqrt(m2 / (m2 - m * m)), 1e-9);
  Tensor centred(DType::kF32, {3, 2});
  const float zero_mean[] = {-1, 1, 2, -2, 0.5f, -0.5f};
  std::copy(std::begin(zero_mean), std::end(zero_mean), centred.data<float>());
  EXPECT_NEAR(layer_norm_conditioning(centred, 1, 0), 1.0, 1e-12);
}

// Drawn UNet 72 (a mid-block of 2 channels): its ff.net.0 group's LayerNorm normalizes rows of
// 2 nearly equal values; a correct bf16 local error, 0.045, fails the plain 3 u + sum bound
// (0.0117). Judged with the LayerNorm's conditioning, the case passes and the record names it.
TEST(LayerNormConditioning, ATwoChannelLayerNormOfADrawnUnetIsJudgedWithIt) {
  ModelCache models;
  const CaseResult r = run_case(testing::case_of("unet.step model=random:unet_2d_condition:72 "
                                                 "res=48x80 w=bf16 a=bf16 acc=f32"),
                                RunOptions{}, models);
  ASSERT_EQ(r.outcome, Outcome::kPassed) << r.reason;
  bool found = false;
  for (const CheckpointRecord& rec : r.checkpoints) {
    if (rec.name != "mid_block.attentions.0.transformer_blocks.0.ff.net.0") continue;
    found = true;
    EXPECT_GT(rec.local.rel_l2, 0.0117 * 2);
    EXPECT_NE(rec.tolerance_basis.find("LayerNorm conditioning"), std::string::npos)
        << rec.tolerance_basis;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tp
