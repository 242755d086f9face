// The contract check's convolutions (reference/torch/contract_conv.cpp) against LibTorch's own
// fp64 convs: the value to fp64's rounding, and each sum of nonnegative terms an upper bound of
// the exact one by no more than the raise it was given, over 1-D to 3-D geometries (strides,
// dilation, groups, asymmetric and replicated padding, batches, several blocks of positions)
// and where fp32 overflows.
#include "reference/torch/contract_conv.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tp::torch_path {
namespace {

struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;  // [B, C, *S], [Cout, C / groups, *K]
  std::vector<int> strides, dilations, pads_lo, pads_hi;
  PadMode pad_mode = PadMode::kZeros;
  int groups = 1;
  double scale = 2;  // x in [-scale, scale]
};

std::ostream& operator<<(std::ostream& os, const ConvCase& c) { return os << c.name; }

std::vector<ConvCase> conv_cases() {
  return {
      {"same3x3", {1, 8, 12, 10}, {6, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"stride2_asymmetric", {2, 4, 11, 9}, {5, 4, 3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}},
      {"dilated_groups",
       {1, 6, 13, 12},
       {4, 3, 3, 3},
       {1, 1},
       {2, 2},
       {2, 2},
       {2, 2},
       PadMode::kZeros,
       2},
      {"blocks_of_positions", {1, 8, 70, 66}, {3, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {"conv1d", {2, 5, 17}, {7, 5, 3}, {1}, {1}, {1}, {1}},
      {"causal3d_replicate",
       {1, 4, 5, 7, 6},
       {3, 4, 3, 3, 3},
       {1, 1, 1},
       {1, 1, 1},
       {2, 1, 1},
       {0, 1, 1},
       PadMode::kReplicate},
      {"stride3d", {1, 3, 4, 9, 8}, {2, 3, 3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},
      {"fp32_overflows",
       {1, 4, 6, 6},
       {2, 4, 3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       {1, 1},
       PadMode::kZeros,
       1,
       1e37},
  };
}

class ContractConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ContractConv, MatchesLibTorchAndBoundsItsSums) {
  const ConvCase& c = GetParam();
  torch::manual_seed(7);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor x = (torch::rand(c.x, f64) * 2 - 1) * c.scale;
  const torch::Tensor e = torch::rand(c.x, f64) * 1e-3;
  const torch::Tensor w = torch::rand(c.w, f64) * 2 - 1, b = torch::rand({c.w[0]}, f64) - 0.5;
  Op op;
  op.kind = OpKind::kConv;
  op.attrs.strides = c.strides;
  op.attrs.dilations = c.dilations;
  op.attrs.pads_lo = c.pads_lo;
  op.attrs.pads_hi = c.pads_hi;
  op.attrs.pad_mode = c.pad_mode;
  op.attrs.conv_groups = c.groups;
  const double raise = 1 + 1e-5;
  const ConvSums got = conv_sums(op.attrs, x, e, w, b, raise);
  const torch::Tensor y = run_op(op, {x}, w, b);
  const torch::Tensor terms = run_op(op, {x.abs()}, w.abs(), b.abs());
  const torch::Tensor carried = run_op(op, {e}, w.abs(), torch::Tensor());
  ASSERT_EQ(got.y.sizes(), y.sizes());
  ASSERT_EQ(got.terms.sizes(), y.sizes());
  ASSERT_EQ(got.carried.sizes(), y.sizes());
  EXPECT_LE((got.y - y).abs().max().item<double>(), 1e-13 * terms.max().item<double>());
  // fp32's roundings of |x| and |w| and its sums are far below 1e-5 on these few terms.
  EXPECT_TRUE((got.terms >= terms).all().item<bool>());
  EXPECT_TRUE((got.terms <= terms * (raise * raise)).all().item<bool>());
  EXPECT_TRUE((got.carried >= carried).all().item<bool>());
  EXPECT_TRUE((got.carried <= carried * (raise * raise)).all().item<bool>());
  // Without e and a bias: no carried sums, and the value is the conv alone.
  const ConvSums bare = conv_sums(op.attrs, x, torch::Tensor(), w, torch::Tensor(), raise);
  EXPECT_FALSE(bare.carried.defined());
  std::vector<int64_t> per_channel(std::size_t(y.dim()), 1);
  per_channel[1] = b.size(0);
  EXPECT_LE((bare.y + b.reshape(per_channel) - y).abs().max().item<double>(),
            1e-13 * terms.max().item<double>());
}

INSTANTIATE_TEST_SUITE_P(Geometries, ContractConv, ::testing::ValuesIn(conv_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tp::torch_path
