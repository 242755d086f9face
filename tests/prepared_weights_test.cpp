// Weights as the compiled path stores them: a conv's or linear's weight in f16, bf16 or fp8 is
// held as its codes alone and decoded, exactly, where a kernel reads it.
#include "compiled/prepared_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness/core/rng.h"

namespace tp::compiled {
namespace {

using ::testing::HasSubstr;

// Every code of `dt`, then a few again, so the vector loops' tails run too.
std::vector<uint8_t> every_code(DType dt) {
  const uint32_t n = dtype_size(dt) == 2 ? 1u << 16 : 1u << 8;
  std::vector<uint8_t> codes;
  for (uint32_t c = 0; c < n + 7; ++c)
    for (std::size_t b = 0; b < dtype_size(dt); ++b) codes.push_back(uint8_t((c % n) >> (8 * b)));
  return codes;
}

TEST(PreparedWeights, EveryCodeDecodesToItsValue) {
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2}) {
    const std::vector<uint8_t> codes = every_code(dt);
    const int64_t n = int64_t(codes.size() / dtype_size(dt));
    std::vector<float> out(static_cast<std::size_t>(n));
    decode_codes(dt, codes.data(), out.data(), n);
    const uint32_t distinct = dtype_size(dt) == 2 ? 1u << 16 : 1u << 8;
    for (int64_t i = 0; i < n; ++i) {
      const double want = decode_narrow(dt, uint32_t(i) % distinct);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(out[std::size_t(i)])) << dtype_name(dt) << " code " << i;
      else
        ASSERT_EQ(double(out[std::size_t(i)]), want) << dtype_name(dt) << " code " << i;
    }
  }
}

// Every 251st float, then the named ones around f16's range, in rows of 4096 (a NaN ends the
// vector loop for the rest of its row).
TEST(PreparedWeights, EncodingGivesTheBitsOfTheScalarRounding) {
  std::vector<float> floats;
  for (int64_t b = 0; b < (int64_t(1) << 32); b += 251) {
    float f;
    const uint32_t bits = uint32_t(b);
    std::memcpy(&f, &bits, sizeof f);
    floats.push_back(f);
  }
  // Last, since the vector loop leaves the rest of the row from a NaN's block to the scalar one.
  for (float named : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 0x1p-14f, 0x1p-24f, 0x1p-25f,
                      0x1.8p-24f, std::nanf(""), -std::nanf("")})
    floats.push_back(named);
  for (DType dt : {DType::kF16, DType::kBF16}) {
    std::vector<uint8_t> codes(2 * floats.size());
    const int64_t n = int64_t(floats.size());
    for (int64_t at = 0; at < n; at += 4096)
      encode_codes(dt, floats.data() + at, codes.data() + 2 * at, std::min<int64_t>(4096, n - at));
    int64_t mismatches = 0;
    for (std::size_t i = 0; i < floats.size(); ++i) {
      uint16_t got;
      std::memcpy(&got, codes.data() + 2 * i, sizeof got);
      const uint16_t want =
          dt == DType::kF16 ? f32_to_f16_bits(floats[i]) : f32_to_bf16_bits(floats[i]);
      if (got != want && mismatches++ == 0)
        ADD_FAILURE() << dtype_name(dt) << ": " << floats[i] << " gave " << got << ", not " << want;
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(dt);
  }
}

class PreparedWeightsStore : public ::testing::Test {
 protected:
  PreparedWeightsStore() {
    Tensor w = Tensor::uninitialized(DType::kF32, {5, 3, 3, 2});
    Rng rng(7, "prepared-weights");
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = float(rng.normal(0.3));
    weights_.emplace("conv.weight", w);
    Tensor b = Tensor::uninitialized(DType::kF32, {5});
    for (int64_t i = 0; i < 5; ++i) b.data<float>()[i] = float(rng.normal());
    weights_.emplace("conv.bias", b);
  }
  std::shared_ptr<const PreparedParam> get(const std::string& policy, const std::string& key,
                                           bool matrix) {
    return store_.get(weights_, 1, key, parse_layer_policy(policy).value(), matrix, {}).value();
  }
  // The checkpoint's weight (o, c, ky, kx) at its channels-last place [o][ky][kx][c].
  double weight(int64_t o, int64_t c, int64_t ky, int64_t kx) const {
    return weights_.at("conv.weight").data<float>()[((o * 3 + c) * 3 + ky) * 2 + kx];
  }
  static int64_t channels_last(int64_t o, int64_t c, int64_t ky, int64_t kx) {
    return ((o * 3 + ky) * 2 + kx) * 3 + c;
  }
  Weights weights_;
  WeightStore store_;
};

TEST_F(PreparedWeightsStore, NarrowMatrixWeightsAreHeldAsTheirCodesAlone) {
  for (DType dt : {DType::kF16, DType::kBF16}) {
    const std::string policy = std::string("w=") + dtype_name(dt) + ",a=" + dtype_name(dt);
    const auto p = get(policy, "conv.weight", true);
    EXPECT_TRUE(p->values.empty()) << "no fp32 copy of a weight stored in " << dtype_name(dt);
    EXPECT_EQ(p->count(), 90);
    EXPECT_EQ(p->storage_bytes(), 180);
    const ParamFloats floats(*p);
    for (int64_t o = 0; o < 5; ++o)
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 2; ++kx)
            EXPECT_EQ(double(floats.data()[channels_last(o, c, ky, kx)]),
                      round_through(dt, weight(o, c, ky, kx)))
                << dtype_name(dt) << " " << o << c << ky << kx;
    const auto bias = get(policy, "conv.bias", false);
    EXPECT_TRUE(bias->codes.empty()) << "vectors keep their decoded values";
    EXPECT_EQ(bias->values[2], float(round_through(dt, weights_.at("conv.bias").data<float>()[2])));
  }
}

TEST_F(PreparedWeightsStore, Fp8WeightsKeepOneByteCodesAndTheirScales) {
  const auto p = get("w=f8e4m3,a=bf16", "conv.weight", true);
  EXPECT_EQ(p->codes.size(), 90u);
  EXPECT_EQ(p->storage_bytes(), 90 + 5 * 4);
  const ParamFloats floats(*p);
  for (int64_t o = 0; o < 5; ++o) {
    const double scale = p->scales[std::size_t(o)];
    EXPECT_GT(scale, 0);
    const double x = weight(o, 1, 2, 0) / scale;
    EXPECT_EQ(double(floats.data()[channels_last(o, 1, 2, 0)]),
              decode_narrow(DType::kF8E4M3, encode_narrow(DType::kF8E4M3, x)));
  }
}

TEST_F(PreparedWeightsStore, TwoWeightsDecodedAtOnceKeepTheirOwnValues) {
  const auto f16 = get("w=f16,a=f16", "conv.weight", true);
  const auto bf16 = get("w=bf16,a=bf16", "conv.weight", true);
  const ParamFloats a(*f16);
  {
    const ParamFloats b(*bf16);
    EXPECT_NE(a.data(), b.data());
    EXPECT_EQ(double(b.data()[0]), round_through(DType::kBF16, weight(0, 0, 0, 0)));
  }
  EXPECT_EQ(double(a.data()[0]), round_through(DType::kF16, weight(0, 0, 0, 0)));
  const ParamFloats again(*bf16);
  EXPECT_NE(a.data(), again.data()) << "a released buffer is reused, a live one is not";
}

TEST_F(PreparedWeightsStore, ConsumedWeightsAreFreedOncePreparedAndStillServeTheirPlans) {
  const auto kept = get("w=f16,a=f16", "conv.weight", true);
  store_.consume(weights_);
  store_.done_with(weights_, 1, "conv.weight");
  EXPECT_EQ(weights_.count("conv.weight"), 0u) << "the source tensor is freed";
  EXPECT_EQ(weights_.count("conv.bias"), 1u) << "a tensor not yet prepared stays";
  // Another plan with the same storage reads the prepared tensor; another storage cannot.
  EXPECT_EQ(get("w=f16,a=f16", "conv.weight", true), kept);
  auto other =
      store_.get(weights_, 1, "conv.weight", parse_layer_policy("w=bf16,a=bf16").value(), true, {});
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.error().message(), HasSubstr("freed once prepared"));
  // Weights the store was not handed are never freed.
  Weights mine = weights_;
  store_.done_with(mine, 1, "conv.bias");
  EXPECT_EQ(mine.count("conv.bias"), 1u);
}

}  // namespace
}  // namespace tp::compiled
