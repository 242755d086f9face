// The local rule's conditioning factors measured on the reference: a conv's or linear's
// (matrix_conditioning), and the drawn config whose cancelling conv needed it.
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
  EXPECT_NEAR(group_matrix_conditioning(g, {0, 1}, weights, {{x, in}}),
              std::sqrt(1 + 1.001f * 1.001f) / (1.001f - 1), 0.5);
  EXPECT_EQ(group_matrix_conditioning(g, {0, 1}, weights, {}), 1.0);  // nothing to run it from
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

}  // namespace
}  // namespace tp
