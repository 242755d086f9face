// diffusers' one-head attention over an image's positions (harness/core/graph.h's
// image_attentions()) on the compiled path: channels-last, as one group whose token views are the
// image's memory (a VAE's mid-block), and row-major, on the N-dimensional kernels, when the graph
// has other N-d ops. Both agree with the fp32 reference; a group may end at the token view back
// to the image (no residual add).
#include <gtest/gtest.h>

#include <cmath>

#include "compiled/session.h"
#include "harness/core/rng.h"
#include "reference/executor.h"
#include "tests/support/compare.h"

namespace tp::compiled {
namespace {

Tensor random(Shape shape, const std::string& stream, double scale) {
  Tensor t(DType::kF32, std::move(shape));
  Rng rng(5, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform(-scale, scale));
  return t;
}

// x [1,8,6,7] -> tokens -> q, k, v -> one head -> to_out -> image; with `gelu_after`, a GELU on
// the image makes the graph row-major.
Graph image_attention_graph(bool gelu_after) {
  GraphBuilder b(gelu_after ? "attention_then_gelu" : "attention");
  const int x = b.input("x");
  const int t = b.to_tokens("attn.to_tokens", x, 8);
  const int q = b.linear_last("attn.to_q", t, 8, 8), k = b.linear_last("attn.to_k", t, 8, 8),
            v = b.linear_last("attn.to_v", t, 8, 8);
  const int a = b.multi_head_attention("attn.sdpa", q, k, v, 1, 1 / std::sqrt(8.0));
  int y = b.to_image("attn.to_image", b.linear_last("attn.to_out.0", a, 8, 8), x);
  if (gelu_after) y = b.gelu("gelu", y, false);
  b.output("y", y);
  return b.finish();
}

TEST(CompiledImageAttention, RunsChannelsLastAsOneGroupAndRowMajorOnTheNdKernels) {
  const Tensor x = random({1, 8, 6, 7}, "x", 2);
  Weights w;
  for (bool gelu : {false, true}) {
    const Graph g = image_attention_graph(gelu);
    for (const ParamSpec& p : g.params) w.emplace(p.key, random(p.shape, p.key, 0.5));
    EXPECT_EQ(image_attentions(g).size(), 1u);
    EXPECT_EQ(g.has_nd_ops(), gelu);
    SessionOptions o;
    o.policy.base = parse_layer_policy("w=f32,a=f32,acc=f32").value();
    Session session(o);
    auto got = session.run(g, w, {{"x", x}});
    ASSERT_TRUE(got.ok()) << got.error().message();
    const Plan& plan = *session.plans()[0];
    EXPECT_EQ(plan.row_major, gelu);
    if (!gelu) {
      ASSERT_EQ(plan.groups.size(), 1u);
      EXPECT_EQ(plan.groups[0].kind, GroupKind::kAttention);
    }
    auto want = ref::run_graph(g, w, {{"x", x}}, DType::kF32);
    ASSERT_TRUE(want.ok()) << want.error().message();
    EXPECT_LT(testing::relative_l2((*got)[0].second, (*want)[0].second), 1e-6) << g.name;
  }
}

}  // namespace
}  // namespace tp::compiled
