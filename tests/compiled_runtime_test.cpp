// The compiled path at run time: non-perturbing capture, the plan cache and shape buckets,
// shared modules (co-resident, interleaved, isolated: bitwise equal), memory refusal, and
// each injected fault changing results on a configuration that shows it.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "compiled/executor.h"
#include "compiled/kernels/emulated/kernels.h"
#include "compiled/session.h"
#include "harness/core/rng.h"
#include "harness/models/vae/pipeline.h"
#include "harness/models/vae/tiling.h"
#include "harness/models/vae/vae_graphs.h"
#include "tests/support/compare.h"
#include "tests/support/fixtures.h"

namespace tp::compiled {
namespace {

// The f16 stores and loads of group outputs (eight values per vector instruction where the
// build has F16C, a scalar tail) give the bits of f16 encoder's round to nearest even
// (tp::f32_to_f16_bits), on every f16 value, halfway cases, overflow, NaN, and a length that
// leaves a tail.
// SiLU's exp has the same bits in its vector lanes as in scalar code, so the emulation (and a
// baseline made with it) does not depend on the CPU's vector width; it stays within 2 ulp of exp.
TEST(PortableExp, WithinTwoUlpOfExpAndTheVectorSiluEqualsTheScalarOne) {
  double worst = 0;
  for (uint32_t bits = 0; bits < 0xFFFFFFFFu - 4093; bits += 4093) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!(std::abs(x) <= 88.0f)) continue;
    const double want = std::exp(double(x));
    const float got = emulated::portable_expf(x);
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(float(want)), -126) - 23);
    worst = std::max(worst, std::abs(double(got) - want) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_GT(worst, 0.0) << "the sweep must reach inexact results";
  EXPECT_EQ(emulated::portable_expf(0.0f), 1.0f);
  EXPECT_EQ(emulated::portable_expf(-200.0f), 0.0f);
  EXPECT_EQ(emulated::portable_expf(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(emulated::portable_expf(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(emulated::portable_expf(std::nanf(""))));

  // Odd length: vector lanes and a scalar tail; values across SiLU's range and its specials.
  Tensor x(DType::kF32, {1, 1, 1, (int64_t(1) << 20) + 5});
  Rng rng(3, "silu");
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = float(rng.uniform(-120, 120));
  p[1] = std::numeric_limits<float>::infinity();
  p[2] = -std::numeric_limits<float>::infinity();
  p[3] = std::nanf("");
  p[4] = -0.0f;
  const Tensor y = emulated::pointwise(OpKind::kSilu, OpAttrs{}, x);
  int64_t differ = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float want = p[i] / (1.0f + emulated::portable_expf(-p[i]));
    const float got = y.data<float>()[i];
    differ += std::memcmp(&want, &got, sizeof got) != 0;
  }
  EXPECT_EQ(differ, 0);
}

// GELU's tanh form (Wan's feed-forward) as x / (1 + exp(-2z)): the vector lanes give the scalar
// tail's bits; the error against 0.5 x (1 + tanh z) in double, in units of the bound 6 fp32 ulp
// of the result plus what z's own fp32 rounding moves exp(-2z) by (|2z| times 4 ulp of 1), is at
// most 1 down to 1e-36: deep in the negative tail too, where 0.5 x (1 + tanhf z) in fp32 cancels
// to few correct bits or to 0.
TEST(PortableExp, GeluTanhLanesEqualTheScalarTailAndStayWithinTheBound) {
  const int64_t n = (int64_t(1) << 16) + 7;
  std::vector<float> x(static_cast<std::size_t>(n)), y(x.size()), one(1);
  Rng rng(4, "gelu");
  for (float& v : x) v = float(rng.uniform(-12, 12));
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = std::nanf("");
  x[3] = -0.0f;
  x[4] = 1e-30f;
  emulated::gelu_tanh_values(x.data(), n, y.data());
  double worst = 0, worst_tanhf = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[std::size_t(i)], got = y[std::size_t(i)];
    emulated::gelu_tanh_values(&v, 1, one.data());  // a tail of one: the scalar code
    ASSERT_EQ(std::memcmp(&one[0], &got, sizeof got), 0) << v;
    if (!std::isfinite(v)) continue;
    const double z = std::sqrt(2 / M_PI) * (double(v) + 0.044715 * double(v) * v * v);
    const double want = v / (1 + std::exp(-2 * z));  // 0.5 v (1 + tanh z), exactly
    if (std::abs(want) < 1e-36) continue;  // below it exp(-2z) passes FLT_MAX: 0, as on CUDA
    const double bound = std::ldexp(6.0, std::ilogb(float(want)) - 23) +
                         std::abs(2 * z) * std::ldexp(4.0, -24) * std::abs(want);
    const float zf = 0.7978845608f * (v + 0.044715f * v * v * v);
    worst = std::max(worst, std::abs(double(got) - want) / bound);
    worst_tanhf = std::max(worst_tanhf, std::abs(0.5 * v * (1 + std::tanh(zf)) - want) / bound);
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_GT(worst_tanhf, 1000.0) << "the sweep must reach the tail where the tanh form cancels";
  EXPECT_EQ(y[1], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0f);
}

// The attention's softmax row (both emulated attentions): the exp in place has the scalar
// portable_expf's bits in every lane and the tail; each weight within a few fp32 ulp of the
// softmax computed in double, with the mask added and the row max subtracted; keys past `seen`
// (frame-causal) weigh exactly 0; the weights rounded to f16 under attn=act; and under the
// softmax-no-max fault a row whose exp overflows is not finite.
TEST(EmulatedSoftmax, RowsMatchTheSoftmaxInDoubleAndKeysPastSeenWeighZero) {
  const int64_t n = 1000 + 7, seen = 837;
  Rng rng(5, "softmax");
  std::vector<float> scores(static_cast<std::size_t>(n)), mask(static_cast<std::size_t>(n));
  for (float& v : scores) v = float(rng.uniform(-30, 30));
  for (float& v : mask) v = float(rng.uniform(-2, 0));
  std::vector<float> exps = scores;
  emulated::portable_expf_in_place(exps.data(), n);
  for (int64_t j = 0; j < n; ++j)
    ASSERT_EQ(exps[std::size_t(j)], emulated::portable_expf(scores[std::size_t(j)])) << j;

  const float scale = 0.125f;
  std::vector<float> s = scores;
  emulated::softmax_row(s.data(), mask.data(), seen, n, {scale, false, DType::kF32, DType::kF32});
  std::vector<double> x(static_cast<std::size_t>(seen));
  for (int64_t j = 0; j < seen; ++j)
    x[std::size_t(j)] = double(scores[std::size_t(j)] * scale) + mask[std::size_t(j)];
  const double max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (double& v : x) sum += (v = std::exp(v - max));
  for (int64_t j = 0; j < seen; ++j) {
    const double want = x[std::size_t(j)] / sum;
    EXPECT_NEAR(s[std::size_t(j)], want, 8 * std::ldexp(want, -23) + 1e-45) << j;
  }
  for (int64_t j = seen; j < n; ++j) EXPECT_EQ(s[std::size_t(j)], 0.0f) << j;

  std::vector<float> f16 = scores;
  emulated::softmax_row(f16.data(), nullptr, n, n, {scale, false, DType::kF32, DType::kF16});
  for (float v : f16) EXPECT_EQ(v, emulated::round_to(DType::kF16, v));

  std::vector<float> overflow = scores;
  overflow[3] = 1000.0f;  // exp(1000 * 0.125) overflows without the max subtracted
  emulated::softmax_row(overflow.data(), nullptr, n, n, {scale, true, DType::kF16, DType::kF32});
  EXPECT_FALSE(std::isfinite(overflow[3]));
}

// NCHW <-> NHWC in tiles gives every element where the definition puts it, for each element size,
// shapes that leave partial tiles, a batch of two, and a size past the threshold for threads.
TEST(TransposeChannels, PutsEveryElementWhereTheLayoutSays) {
  const Shape shapes[] = {{2, 3, 5, 7}, {1, 33, 9, 11}, {2, 320, 64, 64}};
  for (const Shape& s : shapes)
    for (const std::size_t elem : {std::size_t(1), std::size_t(2), std::size_t(4), std::size_t(8)})
      for (const bool to_last : {true, false}) {
        const int64_t b = s[0], c = s[1], hw = s[2] * s[3], n = shape_numel(s);
        std::vector<std::byte> src(std::size_t(n) * elem), dst(src.size());
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte((i * 131 + i / 7) & 0xff);
        compiled::transpose_channels(src.data(), dst.data(), s, elem, to_last);
        int64_t wrong = 0;
        for (int64_t im = 0; im < b; ++im)
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t p = 0; p < hw; ++p) {
              const std::size_t first = std::size_t((im * c + ch) * hw + p) * elem,
                                last = std::size_t((im * hw + p) * c + ch) * elem;
              wrong += std::memcmp(dst.data() + (to_last ? last : first),
                                   src.data() + (to_last ? first : last), elem) != 0;
            }
        EXPECT_EQ(wrong, 0) << shape_string(s) << " elem " << elem
                            << (to_last ? " to NHWC" : " to NCHW");
      }
}

// GroupNorm on a planar [B, C, T, H, W] tensor (a video VAE's row-major plan, no channels-last
// copy) gives the bits of the channels-last kernel on the same values, under the contract's
// two-pass statistics and under each fault that changes them: the same sums in the same order.
TEST(EmulatedGroupNorm, PlanarGivesTheBitsOfChannelsLast) {
  const int64_t b = 2, c = 24, pixels = 3 * 11 * 13, groups = 6;
  Rng rng(9, "group norm");
  Tensor planar = Tensor::uninitialized(DType::kF32, {b, c, 3, 11, 13});
  Tensor last = Tensor::uninitialized(DType::kF32, {b, 3 * 11, 13, c});
  for (int64_t n = 0; n < b; ++n)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t p = 0; p < pixels; ++p) {
        const float v = float(rng.uniform(-4, 4) + 100.0 * double(j % 3));
        planar.data<float>()[(n * c + j) * pixels + p] = v;
        last.data<float>()[(n * pixels + p) * c + j] = v;
      }
  compiled::PreparedParam gamma, beta;
  for (int64_t j = 0; j < c; ++j) {
    gamma.values.push_back(float(rng.uniform(0.5, 1.5)));
    beta.values.push_back(float(rng.uniform(-1, 1)));
  }
  for (const DType one_pass : {DType::kF64, DType::kF32, DType::kF16})
    for (const bool tail : {false, true}) {
      const Tensor a =
          emulated::group_norm(planar, gamma, beta, int(groups), 1e-6, one_pass, tail, true);
      const Tensor want =
          emulated::group_norm(last, gamma, beta, int(groups), 1e-6, one_pass, tail);
      int64_t wrong = 0;
      for (int64_t n = 0; n < b; ++n)
        for (int64_t j = 0; j < c; ++j)
          for (int64_t p = 0; p < pixels; ++p) {
            const float got = a.data<float>()[(n * c + j) * pixels + p];
            const float expected = want.data<float>()[(n * pixels + p) * c + j];
            wrong += std::memcmp(&got, &expected, sizeof(float)) != 0;
          }
      EXPECT_EQ(wrong, 0) << dtype_name(one_pass) << (tail ? " vector-tail" : "");
    }
}

TEST(ActivationIo, F16StoresAndLoadsMatchTheScalarEncoderBitForBit) {
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = f16_bits_to_f32(uint16_t(h));
    x.push_back(v);
    x.push_back(std::nextafter(v, 0.0f));  // just below a halfway point or an f16 value
  }
  const float specials[] = {65504.0f,
                            65520.0f,
                            1e6f,
                            -1e6f,
                            1e-9f,
                            0.5f + 0x1p-12f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  x.push_back(1.0f);  // odd length: a scalar tail
  ASSERT_NE(x.size() % 8, 0u);
  std::vector<uint16_t> stored(x.size());
  emulated::store_rounded(x.data(), int64_t(x.size()), DType::kF16, stored.data());
  std::vector<float> loaded(x.size());
  emulated::load_f32(stored.data(), DType::kF16, int64_t(x.size()), loaded.data());
  int64_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const uint16_t want = f32_to_f16_bits(x[i]);
    const bool nan = std::isnan(x[i]);
    const bool same =
        nan ? (stored[i] & 0x7c00) == 0x7c00 && (stored[i] & 0x3ff) != 0 : stored[i] == want;
    const float back = f16_bits_to_f32(stored[i]);
    const bool loads =
        nan ? std::isnan(loaded[i]) : std::memcmp(&loaded[i], &back, sizeof(float)) == 0;
    if ((!same || !loads) && bad++ < 3)
      ADD_FAILURE() << "x = " << x[i] << ": stored 0x" << std::hex << stored[i] << ", want 0x"
                    << want << std::dec << ", loaded " << loaded[i];
  }
  EXPECT_EQ(bad, 0);
}

using testing::bitwise_equal;

SessionOptions options(const char* policy, const char* faults = "", const char* shapes = "exact") {
  SessionOptions o;
  o.policy.base = parse_layer_policy(policy).value();
  o.faults = parse_faults(faults).value();
  o.shapes = parse_shape_policy(shapes).value();
  return o;
}

Tensor random_latent(int64_t h, int64_t w, uint64_t seed) {
  Tensor t(DType::kF32, {1, 4, h, w});
  Rng rng(seed, "latent");
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform(-2, 2));
  return t;
}

Tensor only(const Expected<NamedTensors>& out, const std::string& name) {
  if (!out.ok()) throw std::runtime_error(out.error().message());
  const Tensor* t = find_tensor(out.value(), name);
  if (t == nullptr) throw std::runtime_error("no output " + name);
  return *t;
}

bool has_non_finite(const Tensor& t) {
  const Tensor d = t.to(DType::kF64);
  for (int64_t i = 0; i < d.numel(); ++i)
    if (!std::isfinite(d.data<double>()[i])) return true;
  return false;
}

class CompiledRuntimeTest : public ::testing::Test {
 protected:
  Tensor decode(Session& s, const Model& m, const Tensor& latent) {
    return only(s.run(build_decoder_graph(vae_config(m)), m.weights, {{"latents", latent}}),
                "sample");
  }
  Tensor encode_mean(Session& s, const Model& m, const Tensor& image) {
    return only(s.run(build_encoder_graph(vae_config(m)), m.weights, {{"sample", image}}), "mean");
  }
  Model kl_ = testing::fixture_model("tiny-kl");
  Tensor image_ = testing::fixture_input("tiny-kl", "image");
  Tensor latent_ = testing::fixture_input("tiny-kl", "latent");
};

TEST_F(CompiledRuntimeTest, CaptureDoesNotPerturb) {
  Session watched(options("w=f16,a=f16")), plain(options("w=f16,a=f16"));
  const Graph dec = build_decoder_graph(vae_config(kl_));
  std::vector<std::string> seen;
  auto observed = watched.run(dec, kl_.weights, {{"latents", latent_}},
                              [&](const Group&, const NamedTensors& cps) {
                                for (const auto& [name, t] : cps) seen.push_back(name);
                              });
  EXPECT_TRUE(bitwise_equal(only(observed, "sample"), decode(plain, kl_, latent_)));
  EXPECT_EQ(int(seen.size()), watched.plans()[0]->stats.groups);
  EXPECT_NE(std::find(seen.begin(), seen.end(), "decoder.mid_block.attentions.0"), seen.end());
  EXPECT_EQ(seen.back(), "decoder");
}

// A group run alone on the values the full run stored for its inputs gives the full run's
// outputs bitwise (what the CUDA comparison and local error attribution rely on); a missing or
// mis-shaped input is refused with its name.
TEST_F(CompiledRuntimeTest, GroupAloneReproducesTheFullRun) {
  Session s(options("w=f8e4m3,a=bf16"));
  const Graph dec = build_decoder_graph(vae_config(kl_));
  std::map<int, Tensor> values{{dec.inputs[0].second, latent_}};
  ASSERT_TRUE(s.run(dec, kl_.weights, {{"latents", latent_}},
                    [&](const Group& g, const NamedTensors& stored) {
                      for (std::size_t i = 0; i < g.outputs.size(); ++i)
                        values[g.outputs[i]] = stored[i].second;
                    })
                  .ok());
  const Plan& plan = *s.plans()[0];
  for (int i = 0; i < int(plan.groups.size()); ++i) {
    const Group& g = plan.groups[std::size_t(i)];
    std::map<int, Tensor> inputs;
    for (int v : g.inputs) inputs[v] = values.at(v);
    auto out = s.run_group(plan, i, latent_.shape(), inputs);
    ASSERT_TRUE(out.ok()) << out.error().message();
    for (std::size_t o = 0; o < g.outputs.size(); ++o)
      EXPECT_TRUE(bitwise_equal(out.value()[o], values.at(g.outputs[o]))) << g.checkpoints[o];
  }
  const Group& last = plan.groups.back();
  auto missing = s.run_group(plan, int(plan.groups.size()) - 1, latent_.shape(), {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("was not given"), std::string::npos)
      << missing.error().message();
  std::map<int, Tensor> wrong;
  for (int v : last.inputs) wrong[v] = Tensor(DType::kF32, {1, 1, 1, 1});
  auto shaped = s.run_group(plan, int(plan.groups.size()) - 1, latent_.shape(), wrong);
  ASSERT_FALSE(shaped.ok());
  EXPECT_NE(shaped.error().message().find("given as [1, 1, 1, 1]"), std::string::npos)
      << shaped.error().message();
}

// The emulation's bits do not depend on the OpenMP team size: the same encode and the same
// attention products on 1 and 4 threads. (Eigen's parallel GEMM, once used for the attention
// products, picks its kernels by the rows each thread gets: a roundtrip at 96x96 differed from
// the isolated encode after LibTorch had set the team size to 1.)
TEST_F(CompiledRuntimeTest, BitsDoNotDependOnTheOpenMpTeamSize) {
  const int threads = omp_get_max_threads();
  Tensor image(DType::kF32, {1, 3, 96, 96});
  Rng rng(7, "image");
  for (int64_t i = 0; i < image.numel(); ++i) image.data<float>()[i] = float(rng.uniform(-1, 1));
  auto random = [&](Shape shape, const char* stream) {
    Tensor t(DType::kF32, std::move(shape));
    Rng r(11, stream);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(r.uniform(-2, 2));
    return t;
  };
  const Tensor q = random({1, 24, 24, 32}, "q"), k = random({1, 24, 24, 32}, "k"),
               v = random({1, 24, 24, 32}, "v");
  // 1024 tokens: each head's products (1024 x 1024 x 64) are past the size at which a parallel
  // GEMM splits rows among threads.
  const Tensor tq = random({1, 1024, 128}, "tq"), tk = random({1, 1024, 128}, "tk"),
               tv = random({1, 1024, 128}, "tv");
  GraphBuilder b("mha");
  const int x = b.input("q"), y = b.input("k"), z = b.input("v");
  b.output("o", b.multi_head_attention("attn", x, y, z, 2, 0.125));
  const Graph g = b.finish();
  std::vector<Tensor> runs[2];
  for (int i = 0; i < 2; ++i) {
    omp_set_num_threads(i == 0 ? 1 : 4);
    Session s(options("w=f16,a=f16"));
    runs[i].push_back(encode_mean(s, kl_, image));
    runs[i].push_back(emulated::attention(q, k, v, 0.17, false, DType::kF32));
    runs[i].push_back(emulated::nd_op<float>(g.ops.back(), {&tq, &tk, &tv}, {}, {1, 1024, 128}));
  }
  omp_set_num_threads(threads);
  for (std::size_t i = 0; i < runs[0].size(); ++i)
    EXPECT_TRUE(bitwise_equal(runs[0][i], runs[1][i])) << "output " << i;
}

TEST_F(CompiledRuntimeTest, CacheCountsHitsAndCompilations) {
  Session s(options("w=f16,a=f16"));
  decode(s, kl_, random_latent(8, 8, 1));
  decode(s, kl_, random_latent(8, 8, 2));
  decode(s, kl_, random_latent(8, 12, 3));
  EXPECT_EQ(s.stats().compilations, 2);
  EXPECT_EQ(s.stats().hits, 1);
  EXPECT_GT(s.stats().compile_seconds, 0.0);
  for (const Plan* p : s.plans()) EXPECT_GT(p->stats.arena_bytes, 0);
}

TEST_F(CompiledRuntimeTest, BucketedShapesCompileOnceAndEqualExactShapes) {
  Session exact(options("w=f16,a=f16")),
      bucketed(options("w=f16,a=f16", "", "bucket:64"));  // 16 latents
  for (auto [h, w] : {std::pair{8, 8}, {9, 13}, {16, 16}, {12, 7}}) {
    const Tensor z = random_latent(h, w, uint64_t(h) * 100 + uint64_t(w));
    EXPECT_TRUE(bitwise_equal(decode(bucketed, kl_, z), decode(exact, kl_, z))) << h << "x" << w;
  }
  EXPECT_EQ(bucketed.stats().compilations, 1);
  EXPECT_EQ(bucketed.stats().hits, 3);
  EXPECT_EQ(exact.stats().compilations, 4);
}

TEST_F(CompiledRuntimeTest, SharedModulesAreBitwiseEqualCoResidentInterleavedAndIsolated) {
  const Graph enc = build_encoder_graph(vae_config(kl_)),
              dec = build_decoder_graph(vae_config(kl_));
  Tensor image2 = image_.to(DType::kF64);
  for (int64_t i = 0; i < image2.numel(); ++i) image2.data<double>()[i] *= -0.5;
  // Isolated: every plan in its own session.
  auto isolated = [&](const Tensor& image) {
    Session a(options("w=f16,a=f16")), b(options("w=f16,a=f16"));
    const Tensor mean = encode_mean(a, kl_, image);
    return std::pair{mean, decode(b, kl_, mean)};
  };
  const auto [mean1, sample1] = isolated(image_);
  const auto [mean2, sample2] = isolated(image2);
  // Co-resident and interleaved: one session, shared weights, the decoder reading the
  // encoder's latents in place, calls alternating.
  Session s(options("w=f16,a=f16"));
  auto chained = [&](const Tensor& image) {
    return s.run_chained(enc, dec, kl_.weights, {{"sample", image}}, "mean");
  };
  auto r1 = chained(image_);
  EXPECT_TRUE(bitwise_equal(only(r1, "sample"), sample1));
  EXPECT_TRUE(bitwise_equal(only(r1, "mean"), mean1));
  EXPECT_TRUE(bitwise_equal(decode(s, kl_, mean2), sample2));
  EXPECT_TRUE(bitwise_equal(encode_mean(s, kl_, image_), mean1));
  auto r2 = chained(image2);
  EXPECT_TRUE(bitwise_equal(only(r2, "sample"), sample2));
  EXPECT_TRUE(bitwise_equal(only(r2, "mean"), mean2));
  // The two plans hold each weight once, however often they run.
  const std::size_t keys = enc.params.size() + dec.params.size();
  EXPECT_EQ(s.weight_store().count(), keys);
  const int64_t held = s.weight_store().bytes_held();
  decode(s, kl_, random_latent(8, 12, 9));  // a third plan over the same weights
  EXPECT_EQ(s.weight_store().count(), keys);
  EXPECT_EQ(s.weight_store().bytes_held(), held);
}

TEST_F(CompiledRuntimeTest, RefusesAnArenaLargerThanMemoryBeforeAllocating) {
  SessionOptions o = options("w=f16,a=f16");
  o.memory_limit_bytes = 1 << 16;
  Session s(o);
  auto out = s.run(build_decoder_graph(vae_config(kl_)), kl_.weights,
                   {{"latents", random_latent(32, 32, 1)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message().find("needs 2.50 MiB of activation memory at input [1, 4, 32, "
                                       "32] but 64.00 KiB is the memory limit"),
            std::string::npos)
      << out.error().message();
  EXPECT_NE(out.error().message().find("smaller resolution"), std::string::npos);
  EXPECT_EQ(s.stats().peak_arena_bytes, 0) << "refused before allocating";
}

// Each fault against the same run without it: the difference must be one a gate notices.
void expect_fault_shows(const Tensor& faulty, const Tensor& clean, const char* fault) {
  const double err = testing::relative_l2(faulty, clean);
  EXPECT_TRUE(has_non_finite(faulty) || err > 1e-2)
      << fault << " changed the output by only " << err;
}

TEST_F(CompiledRuntimeTest, FaultGroupNormF16AccumShowsOnDecode) {
  Session clean(options("w=f16,a=f16")), faulty(options("w=f16,a=f16", "groupnorm-f16-accum"));
  expect_fault_shows(decode(faulty, kl_, latent_), decode(clean, kl_, latent_),
                     "groupnorm-f16-accum");
}

TEST_F(CompiledRuntimeTest, FaultUpsampleOffByOneShowsOnDecode) {
  Session clean(options("w=f16,a=f16")), faulty(options("w=f16,a=f16", "upsample-off-by-one"));
  expect_fault_shows(decode(faulty, kl_, latent_), decode(clean, kl_, latent_),
                     "upsample-off-by-one");
}

TEST_F(CompiledRuntimeTest, FaultFp8NoScaleShowsWithFp8Weights) {
  Session clean(options("w=f8e4m3,a=bf16")), faulty(options("w=f8e4m3,a=bf16", "fp8-no-scale"));
  expect_fault_shows(decode(faulty, kl_, latent_), decode(clean, kl_, latent_), "fp8-no-scale");
}

TEST_F(CompiledRuntimeTest, FaultSoftmaxNoMaxShowsWhenAttentionLogitsAreLarge) {
  // Sharper attention (to_q and to_k scaled 8x, logits 64x): exp() past f16's range.
  Model sharp = kl_;
  for (const char* key : {"decoder.mid_block.attentions.0.to_q.weight",
                          "decoder.mid_block.attentions.0.to_k.weight"}) {
    Tensor w = sharp.weights.at(key).to(DType::kF64);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<double>()[i] *= 8;
    sharp.weights[key] = w.to(sharp.weights.at(key).dtype());
  }
  Session clean(options("w=f16,a=f16")), faulty(options("w=f16,a=f16", "softmax-no-max"));
  const Tensor reference = decode(clean, sharp, latent_);
  EXPECT_FALSE(has_non_finite(reference)) << "with max subtraction the sharp softmax is fine";
  expect_fault_shows(decode(faulty, sharp, latent_), reference, "softmax-no-max");
}

TEST_F(CompiledRuntimeTest, FaultCacheKeyIgnoresWeightsReusesAnotherModelsPlan) {
  Model other = kl_;
  Tensor w = other.weights.at("decoder.conv_out.weight").to(DType::kF64);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<double>()[i] *= -1;
  other.weights["decoder.conv_out.weight"] =
      w.to(kl_.weights.at("decoder.conv_out.weight").dtype());
  Session fresh(options("w=f16,a=f16"));
  const Tensor want = decode(fresh, other, latent_);
  Session correct(options("w=f16,a=f16")),
      faulty(options("w=f16,a=f16", "cache-key-ignores-weights"));
  decode(correct, kl_, latent_);
  decode(faulty, kl_, latent_);
  EXPECT_TRUE(bitwise_equal(decode(correct, other, latent_), want));
  EXPECT_EQ(correct.stats().compilations, 2);
  expect_fault_shows(decode(faulty, other, latent_), want, "cache-key-ignores-weights");
  EXPECT_EQ(faulty.stats().compilations, 1);
}

TEST_F(CompiledRuntimeTest, FaultArenaAliasCorruptsTheEncoderOutputOfACoResidentRoundtrip) {
  const Graph enc = build_encoder_graph(vae_config(kl_)),
              dec = build_decoder_graph(vae_config(kl_));
  Session alone(options("w=f16,a=f16"));
  const Tensor mean = encode_mean(alone, kl_, image_);
  Session faulty(options("w=f16,a=f16", "arena-alias"));
  auto r = faulty.run_chained(enc, dec, kl_.weights, {{"sample", image_}}, "mean");
  expect_fault_shows(only(r, "mean"), mean, "arena-alias");
}

TEST_F(CompiledRuntimeTest, TilingEngagesExactlyByTheConfigRuleAndRecordsTheGrid) {
  // tiny-kl: sample_size 32 -> latent tile min 8, stride 6. Latent widths 8 (= min) and 9 (> min).
  const TilingOptions on{true, 0, 0};
  auto geometry = tile_geometry(vae_config(kl_), on);
  ASSERT_TRUE(geometry.ok());
  for (int64_t w : {7, 8, 9, 14}) {
    Session tiled(options("w=f16,a=f16")), plain(options("w=f16,a=f16"));
    const Tensor z = random_latent(8, w, uint64_t(w));
    const Tensor a = only(run_pipeline(kl_, Pipeline::kDecode, z, tiled, on), "sample");
    const bool engaged = tiled.tiling().back().engaged;
    EXPECT_EQ(engaged, tiling_engages(geometry.value(), Pipeline::kDecode, z.shape()))
        << tiled.tiling().back().text();
    EXPECT_EQ(engaged, w > 8) << tiled.tiling().back().text();
    if (!engaged) {
      EXPECT_TRUE(bitwise_equal(a, decode(plain, kl_, z)));
    }
  }
}

TEST_F(CompiledRuntimeTest, FaultTileThresholdFromStrideTilesWhatShouldNotBe) {
  // Latent width 7: above stride/ratio (6), within min/ratio (8) - the window field report 4 hit.
  const Tensor z = random_latent(8, 7, 77);
  const TilingOptions on{true, 0, 0};
  Session clean(options("w=f16,a=f16")),
      faulty(options("w=f16,a=f16", "tile-threshold-from-stride"));
  const Tensor want = only(run_pipeline(kl_, Pipeline::kDecode, z, clean, on), "sample");
  const Tensor got = only(run_pipeline(kl_, Pipeline::kDecode, z, faulty, on), "sample");
  EXPECT_NE(faulty.tiling().back().text().find(": tiled, 2x2 tiles"), std::string::npos)
      << faulty.tiling().back().text();
  EXPECT_EQ(got.shape(), want.shape()) << "right-shaped, as in the field";
  expect_fault_shows(got, want, "tile-threshold-from-stride");
}

TEST_F(CompiledRuntimeTest, RefusesTileSizesThatGiveNoWholeTiles) {
  Session s(options("w=f16,a=f16"));
  auto r = run_pipeline(kl_, Pipeline::kDecode, latent_, s, TilingOptions{true, 2, 0});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("use a tile min of at least 8 px"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace tp::compiled
