// The fp32 conv's patch packer (reference/ops/conv.cpp: a panel row of 16 output positions as
// one vector copy inside a line, edge lanes filled from the pad, panels across lines) against the
// fp64 conv's im2col, on geometries that reach each case: lines wider and narrower than a panel,
// replicate and zero pads, dilation, a causal time pad, a strided last axis (the row-at-a-time
// packer), 1-3 spatial axes. Built for the build machine's ISA and, like the sgemm tests, for
// AVX2 and portable C++ (tests/CMakeLists.txt), so each packer a machine may run is checked.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "harness/core/rng.h"
#include "reference/ops/ops.h"
#include "tests/support/compare.h"

namespace tp {
namespace {

struct PackCase {
  std::string name;
  Shape input;  // [B, C, *spatial]
  int cout;
  std::vector<int> kernel, stride, dilation, lo, hi;
  PadMode mode;
};

void PrintTo(const PackCase& c, std::ostream* os) { *os << c.name; }

Tensor seeded(const Shape& shape, const std::string& stream) {
  Tensor t = Tensor::uninitialized(DType::kF64, shape);
  Rng rng(11, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = rng.uniform(-1, 1);
  return t;
}

class ConvPacking : public ::testing::TestWithParam<PackCase> {};

TEST_P(ConvPacking, Fp32MatchesTheFp64Im2col) {
  const PackCase& c = GetParam();
  Shape w_shape{c.cout, c.input[1]};
  for (int k : c.kernel) w_shape.push_back(k);
  const Tensor x = seeded(c.input, c.name + " x"), w = seeded(w_shape, c.name + " w"),
               b = seeded({c.cout}, c.name + " b");
  OpAttrs a;
  a.strides = c.stride;
  a.dilations = c.dilation;
  a.pads_lo = c.lo;
  a.pads_hi = c.hi;
  a.pad_mode = c.mode;
  const Tensor want = ref::conv<double>(x, w, &b, a);
  const Tensor x32 = x.to(DType::kF32), w32 = w.to(DType::kF32), b32 = b.to(DType::kF32);
  const Tensor got = ref::conv<float>(x32, w32, &b32, a);
  // The fp32 inputs' own rounding and fp32 sums of at most a few hundred products.
  EXPECT_LE(testing::relative_l2(got, want), 1e-6) << c.name;
  EXPECT_GT(testing::max_abs(want), 0.1) << c.name;
}

const PackCase kCases[] = {
    {"causal_replicate_37_wide",
     {1, 3, 3, 4, 37},
     4,
     {3, 3, 3},
     {1, 1, 1},
     {1, 1, 1},
     {2, 1, 1},
     {0, 1, 1},
     PadMode::kReplicate},
    {"causal_replicate_64_wide",
     {1, 2, 2, 3, 64},
     3,
     {3, 3, 3},
     {1, 1, 1},
     {1, 1, 1},
     {2, 1, 1},
     {0, 1, 1},
     PadMode::kReplicate},
    {"replicate_lines_of_8",
     {1, 5, 2, 8, 8},
     3,
     {3, 3, 3},
     {1, 1, 1},
     {1, 1, 1},
     {2, 1, 1},
     {0, 1, 1},
     PadMode::kReplicate},
    {"zeros_dilated_40_wide",
     {1, 2, 3, 5, 40},
     3,
     {2, 3, 3},
     {1, 1, 1},
     {1, 2, 2},
     {1, 2, 3},
     {0, 1, 2},
     PadMode::kZeros},
    {"zeros_line_shorter_than_kernel_span",
     {1, 2, 4, 3},
     2,
     {3, 5},
     {1, 1},
     {1, 1},
     {1, 2},
     {1, 2},
     PadMode::kZeros},
    {"conv1d_replicate_50", {2, 3, 50}, 2, {5}, {1}, {1}, {2}, {2}, PadMode::kReplicate},
    {"stride2_last_axis",
     {1, 3, 3, 9, 33},
     2,
     {3, 3, 3},
     {1, 2, 2},
     {1, 1, 1},
     {2, 1, 1},
     {0, 1, 1},
     PadMode::kReplicate},
};

INSTANTIATE_TEST_SUITE_P(Geometries, ConvPacking, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tp
