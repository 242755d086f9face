// Every reference op against LibTorch's own op on random inputs: fp64 agreement to ~1e-12
// relative, fp32 to a few float ulps. Each case is a one-op graph run through both paths.
#include <gtest/gtest.h>

#include <functional>

#include "harness/core/rng.h"
#include "reference/executor.h"
#include "reference/torch/torch_path.h"
#include "tests/support/compare.h"

namespace tp {
namespace {

struct OpCase {
  std::string name;
  Shape input;                                    // [B,C,H,W]; attention gets three such inputs
  std::function<void(GraphBuilder&, int)> build;  // adds ops reading the input value
};

std::ostream& operator<<(std::ostream& os, const OpCase& c) { return os << c.name; }

Tensor random_tensor(const Shape& shape, uint64_t seed, const std::string& stream, double lo = -2,
                     double hi = 2) {
  Tensor t(DType::kF64, shape);
  Rng rng(seed, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = rng.uniform(lo, hi);
  return t;
}

std::vector<OpCase> op_cases() {
  auto conv = [](int cin, int cout, int k, int s, int pt, int pb, int pl, int pr, bool bias) {
    return [=](GraphBuilder& b, int x) {
      b.output("y", b.conv2d("conv", x, cin, cout, k, s, pt, pb, pl, pr, bias));
    };
  };
  auto unary = [](OpKind kind, double scale = 1, double shift = 0) {
    return [=](GraphBuilder& b, int x) {
      OpAttrs a;
      a.scale = scale;
      a.shift = shift;
      b.output("y", b.unary("op", kind, x, a));
    };
  };
  return {
      {"conv3x3_same", {2, 6, 11, 9}, conv(6, 10, 3, 1, 1, 1, 1, 1, true)},
      {"conv1x1", {2, 8, 7, 5}, conv(8, 4, 1, 1, 0, 0, 0, 0, true)},
      {"conv_downsample_asymmetric_pad", {2, 4, 13, 10}, conv(4, 4, 3, 2, 0, 1, 0, 1, true)},
      {"conv_stride2_symmetric_nobias", {1, 5, 12, 9}, conv(5, 5, 3, 2, 1, 1, 1, 1, false)},
      {"conv3x3_wide_rows_blocked", {1, 3, 300, 260}, conv(3, 8, 3, 1, 1, 1, 1, 1, true)},
      {"group_norm",
       {2, 12, 9, 7},
       [](GraphBuilder& b, int x) { b.output("y", b.group_norm("gn", x, 12, 4, 1e-6)); }},
      {"silu", {2, 3, 8, 8}, unary(OpKind::kSilu)},
      {"relu", {2, 3, 8, 8}, unary(OpKind::kRelu)},
      {"tanh_clamp", {2, 3, 8, 8}, unary(OpKind::kTanhClamp, 3)},
      {"affine", {2, 3, 8, 8}, unary(OpKind::kAffine, 0.5, 0.5)},
      {"clamp",
       {2, 3, 8, 8},
       [](GraphBuilder& b, int x) { b.output("y", b.clamp("c", x, -0.5, 1.0)); }},
      {"upsample_nearest2x", {2, 3, 5, 7}, unary(OpKind::kUpsampleNearest2x)},
      {"linear",
       {2, 6, 5, 4},
       [](GraphBuilder& b, int x) { b.output("y", b.linear("fc", x, 6, 9)); }},
      {"add",
       {2, 3, 6, 5},
       [](GraphBuilder& b, int x) {
         b.output("y", b.add("sum", x, b.unary("r", OpKind::kRelu, x)));
       }},
      {"slice_channels",
       {2, 8, 4, 4},
       [](GraphBuilder& b, int x) { b.output("y", b.slice_channels("s", x, 2, 6)); }},
      {"attention",
       {2, 8, 6, 7},
       [](GraphBuilder& b, int x) {
         const int q = b.linear("q", x, 8, 8), k = b.linear("k", x, 8, 8),
                   v = b.linear("v", x, 8, 8);
         b.output("y", b.attention("sdpa", q, k, v, 1.0 / std::sqrt(8.0)));
       }},
      // N = 2304 positions: more than one block of query rows in the reference.
      {"attention_blocked",
       {1, 8, 48, 48},
       [](GraphBuilder& b, int x) {
         const int q = b.linear("q", x, 8, 8), k = b.linear("k", x, 8, 8),
                   v = b.linear("v", x, 8, 8);
         b.output("y", b.attention("sdpa", q, k, v, 1.0));
       }},
  };
}

class ReferenceVsTorch : public ::testing::TestWithParam<OpCase> {};

TEST_P(ReferenceVsTorch, Agrees) {
  const OpCase& c = GetParam();
  GraphBuilder builder("op." + c.name);
  const int x = builder.input("x");
  c.build(builder, x);
  const Graph g = builder.finish();
  const uint64_t seed = hash_name(c.name);  // seeds come from the case id
  Weights w;
  for (const ParamSpec& p : g.params)
    w.emplace(p.key, random_tensor(p.shape, seed, p.key, -0.5, 0.5));
  const NamedTensors in = {{"x", random_tensor(c.input, seed, "x")}};

  for (DType dt : {DType::kF64, DType::kF32}) {
    auto ours = ref::run_graph(g, w, in, dt);
    ASSERT_TRUE(ours.ok()) << ours.error().message();
    auto theirs = torch_path::run_graph(g, w, in, dt);
    ASSERT_TRUE(theirs.ok()) << theirs.error().message();
    const Tensor& a = ours.value()[0].second;
    const Tensor& b = theirs.value()[0].second;
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_GT(testing::max_abs(b), 1e-3) << "output ~zero: the comparison proves nothing";
    const double err = testing::relative_l2(a, b);
    EXPECT_LE(err, dt == DType::kF64 ? 1e-12 : 2e-6) << c.name << " " << dtype_name(dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ReferenceVsTorch, ::testing::ValuesIn(op_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(ReferenceExecutor, RefusesTooSmallInputsBeforeRunning) {
  GraphBuilder b("small");
  const int x = b.input("x");
  b.output("y", b.conv2d("down", x, 1, 1, 3, 2, 0, 1, 0, 1, true));
  const Graph g = b.finish();
  Weights w{{"down.weight", Tensor(DType::kF32, {1, 1, 3, 3})},
            {"down.bias", Tensor(DType::kF32, {1})}};
  auto out = ref::run_graph(g, w, {{"x", Tensor(DType::kF32, {1, 1, 1, 1})}}, DType::kF32);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message().find("too small: at down"), std::string::npos)
      << out.error().message();
}

}  // namespace
}  // namespace tp
