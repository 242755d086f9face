// Every reference op against LibTorch's own op on random inputs: fp64 agreement to ~1e-12
// relative, fp32 to a few float ulps. Each case is a one-op graph run through both paths. The
// N-dimensional ops also run on the compiled path's emulation: its kernels in fp64 to ~1e-12,
// and through a compiled session (fp32 by contract) to the fp32 bound.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdio>
#include <functional>

#include "compiled/kernels/emulated/kernels.h"
#include "compiled/session.h"
#include "harness/core/rng.h"
#include "harness/core/shapes.h"
#include "reference/executor.h"
#include "reference/torch/contract_check.h"
#include "reference/torch/torch_path.h"
#include "tests/support/compare.h"

namespace tp {
namespace {

struct OpCase {
  std::string name;
  Shape input;                                            // "x"
  std::function<void(GraphBuilder&, int)> build;          // adds ops reading the input value
  std::vector<std::pair<std::string, Shape>> extra = {};  // more inputs the ops read by name
  // Timesteps: "x" holds whole numbers in [0, 1000), as schedulers give. The sinusoid is float32
  // on every path by definition (diffusers computes it so): a 1-ulp difference between two
  // float32 exp() for a frequency moves t * freq by up to 6e-5 rad at t = 999, so the bound is
  // float32's, not fp64's.
  bool timesteps = false;
  double fp64_bound() const { return timesteps ? 5e-6 : 1e-12; }
};

std::ostream& operator<<(std::ostream& os, const OpCase& c) { return os << c.name; }

Tensor random_tensor(const Shape& shape, uint64_t seed, const std::string& stream, double lo = -2,
                     double hi = 2) {
  Tensor t(DType::kF64, shape);
  Rng rng(seed, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = rng.uniform(lo, hi);
  return t;
}

// The case's "x": uniform in [-2, 2], or whole timesteps.
Tensor case_input(const OpCase& c, uint64_t seed) {
  Tensor t = random_tensor(c.input, seed, "x", c.timesteps ? 0 : -2, c.timesteps ? 1000 : 2);
  if (c.timesteps)
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = std::floor(t.data<double>()[i]);
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
  // A VAE's one-head attention over the positions of an 8-channel image (image_attentions()).
  auto image_attention = [](double scale) {
    return [=](GraphBuilder& b, int x) {
      const int t = b.to_tokens("t", x, 8);
      const int q = b.linear_last("q", t, 8, 8), k = b.linear_last("k", t, 8, 8),
                v = b.linear_last("v", t, 8, 8);
      const int a = b.multi_head_attention("sdpa", q, k, v, 1, scale);
      b.output("y", b.to_image("image", b.linear_last("out", a, 8, 8), x));
    };
  };
  auto nd_conv = [](int cin, int cout, std::vector<int> k, std::vector<int> s, std::vector<int> d,
                    std::vector<int> lo, std::vector<int> hi, PadMode mode, int groups, bool bias) {
    return [=](GraphBuilder& b, int x) {
      b.output("y", b.conv("conv", x, cin, cout, k, s, d, lo, hi, mode, groups, bias));
    };
  };
  // Self-attention over x [B, L, D] with `heads` heads (q, k, v projections as diffusers').
  auto self_attention = [](int d, int heads, int64_t frame_tokens, bool mask) {
    return [=](GraphBuilder& b, int x) {
      const int q = b.linear_last("to_q", x, d, d, false),
                k = b.linear_last("to_k", x, d, d, false),
                v = b.linear_last("to_v", x, d, d, false);
      const int m = mask ? b.input("mask") : -1;
      b.output("y", b.multi_head_attention("attn", q, k, v, heads,
                                           1.0 / std::sqrt(double(d) / heads), m, frame_tokens));
    };
  };
  auto gelu = [](bool tanh) {
    return [=](GraphBuilder& b, int x) { b.output("y", b.gelu("gelu", x, tanh)); };
  };
  return {
      // N-dimensional ops.
      {"nd_conv1d_stride2",
       {2, 4, 17},
       nd_conv(4, 6, {3}, {2}, {1}, {1}, {1}, PadMode::kZeros, 1, true)},
      {"nd_conv2d_dilated_grouped",
       {1, 6, 11, 10},
       nd_conv(6, 4, {3, 3}, {1, 2}, {2, 1}, {2, 1}, {2, 0}, PadMode::kZeros, 2, true)},
      {"nd_conv3d_causal_replicate",
       {1, 4, 5, 6, 7},
       nd_conv(4, 5, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {2, 1, 1}, {0, 1, 1}, PadMode::kReplicate, 1,
               true)},
      // Lines of 37 and 40: panels of 16 inside one line, at its replicated or zero edges, and
      // across two lines (the fp32 packer's three cases).
      {"nd_conv3d_causal_replicate_wide_lines",
       {1, 3, 3, 4, 37},
       nd_conv(3, 4, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {2, 1, 1}, {0, 1, 1}, PadMode::kReplicate, 1,
               true)},
      {"nd_conv3d_zeros_dilated_wide_lines",
       {1, 2, 3, 5, 40},
       nd_conv(2, 3, {2, 3, 3}, {1, 1, 1}, {1, 2, 2}, {1, 2, 3}, {0, 1, 2}, PadMode::kZeros, 1,
               true)},
      {"nd_conv3d_stride2_zeros_nobias",
       {1, 3, 6, 8, 8},
       nd_conv(3, 4, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {2, 1, 1}, {0, 1, 1}, PadMode::kZeros, 1,
               false)},
      {"nd_linear_last_tokens",
       {2, 5, 12},
       [](GraphBuilder& b, int x) { b.output("y", b.linear_last("proj", x, 12, 7)); }},
      {"nd_linear_last_rank2_nobias",
       {3, 12},
       [](GraphBuilder& b, int x) { b.output("y", b.linear_last("proj", x, 12, 5, false)); }},
      {"nd_attention_self_4_heads", {2, 10, 16}, self_attention(16, 4, 0, false)},
      {"nd_attention_additive_mask",
       {2, 10, 16},
       self_attention(16, 2, 0, true),
       {{"mask", {10, 10}}}},
      {"nd_attention_causal_per_frame", {1, 12, 8}, self_attention(8, 2, 4, false)},
      // 9,000 tokens: 81 M scores, past the torch path's 64 M per block of query rows, so its
      // attention runs in two blocks (the frame mask sliced with them).
      {"nd_attention_blocked_rows_per_frame", {1, 9000, 8}, self_attention(8, 1, 3000, false)},
      {"nd_attention_cross",
       {2, 9, 16},
       [](GraphBuilder& b, int x) {
         const int ctx = b.input("context");
         const int q = b.linear_last("to_q", x, 16, 16, false),
                   k = b.linear_last("to_k", ctx, 12, 16, false),
                   v = b.linear_last("to_v", ctx, 12, 16, false);
         b.output("y", b.multi_head_attention("attn2", q, k, v, 2, 1.0 / std::sqrt(8.0)));
       },
       {{"context", {2, 6, 12}}}},
      {"nd_layer_norm_affine",
       {2, 7, 10},
       [](GraphBuilder& b, int x) { b.output("y", b.layer_norm("norm1", x, {10}, 1e-5, true)); }},
      {"nd_layer_norm_two_dims_no_affine",
       {2, 3, 4, 5},
       [](GraphBuilder& b, int x) {
         b.output("y", b.layer_norm("norm", x, {4, 5}, 1e-6, false));
       }},
      {"nd_rms_norm",
       {2, 6, 16},
       [](GraphBuilder& b, int x) { b.output("y", b.rms_norm("norm_q", x, 16, 1e-6, true)); }},
      {"nd_rms_norm_no_weight",
       {2, 6, 16},
       [](GraphBuilder& b, int x) { b.output("y", b.rms_norm("norm_k", x, 16, 1e-6, false)); }},
      {"nd_gelu_erf", {2, 3, 8, 8}, gelu(false)},
      {"nd_gelu_tanh", {2, 3, 8, 8}, gelu(true)},
      {"nd_concat_axis1",
       {2, 3, 4},
       [](GraphBuilder& b, int x) {
         b.output("y", b.concat("cat", {x, b.input("skip")}, 1));
       },
       {{"skip", {2, 5, 4}}}},
      {"nd_concat_last_axis",
       {2, 3, 4},
       [](GraphBuilder& b, int x) {
         b.output("y", b.concat("cat", {b.input("h"), x}, -1));
       },
       {{"h", {2, 3, 2}}}},
      {"nd_slice_split",
       {2, 9, 4},
       [](GraphBuilder& b, int x) {
         const int lo = b.slice("chunk.0", x, 1, 0, 4), hi = b.slice("chunk.1", x, 1, 4, 9);
         b.output("y", b.concat("cat", {hi, lo}, 1));
       }},
      {"nd_reshape_permute",
       {2, 6, 4, 5},
       [](GraphBuilder& b, int x) {
         b.output("y", b.permute("tokens", b.reshape("flatten", x, {0, 6, -1}), {0, 2, 1}));
       }},
      // DiT modulation: x * (1 + scale) + shift, scale and shift broadcast over the tokens.
      {"nd_binary_modulation",
       {2, 10, 8},
       [](GraphBuilder& b, int x) {
         OpAttrs plus_one;
         plus_one.shift = 1;
         const int scale = b.unary("one_plus_scale", OpKind::kAffine, b.input("scale"), plus_one);
         const int h = b.binary("mul", BinaryOp::kMul, x, scale);
         b.output("y", b.binary("add", BinaryOp::kAdd, h, b.input("shift")));
       },
       {{"scale", {2, 1, 8}}, {"shift", {2, 1, 8}}}},
      {"nd_binary_sub_div_broadcast",
       {3, 1, 5},
       [](GraphBuilder& b, int x) {
         OpAttrs away_from_zero;
         away_from_zero.shift = 3;
         const int y = b.input("y");
         const int d = b.binary("sub", BinaryOp::kSub, x, y);
         b.output("y", b.binary("div", BinaryOp::kDiv, d,
                                b.unary("denominator", OpKind::kAffine, y, away_from_zero)));
       },
       {{"y", {4, 1}}}},
      // A DiT's modulation table added to the time projection; RoPE and unpatchify over a
      // 3 x 2 x 4 token grid (the patch embedding's trailing axes).
      {"nd_add_parameter",
       {2, 6, 8},
       [](GraphBuilder& b, int x) {
         b.output("y", b.add_parameter("modulation", x, "scale_shift_table", {1, 6, 8}));
       }},
      {"nd_rotary_embedding_3_axes",
       {2, 24, 24},
       [](GraphBuilder& b, int x) {
         b.output("y", b.rotary_embedding("rotary_q", x, b.input("grid"), 2, {4, 4, 4}, 10000));
       },
       {{"grid", {2, 5, 3, 2, 4}}}},
      {"nd_unpatchify_odd_patch",
       {2, 24, 30},
       [](GraphBuilder& b, int x) {
         b.output("y", b.unpatchify("unpatchify", x, b.input("grid"), {2, 1, 3}));
       },
       {{"grid", {2, 7, 3, 2, 4}}}},
      // A video ResNet block's ops on [B, C, T, H, W]: GroupNorm and SiLU at rank 5, then a
      // causal 3-D conv and the residual add.
      {"nd_video_resnet_5d",
       {2, 8, 3, 4, 5},
       [](GraphBuilder& b, int x) {
         int h = b.unary("act", OpKind::kSilu, b.group_norm("norm1", x, 8, 4, 1e-6));
         h = b.conv("conv1", h, 8, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {2, 1, 1}, {0, 1, 1},
                    PadMode::kReplicate);
         b.output("y", b.binary("add", BinaryOp::kAdd, x, h));
       }},
      // diffusers' Timesteps: t up to 999 (timesteps drawn from [0, 1000)), flip and shift
      // variants, an odd dim's zero column.
      {"nd_timestep_embedding_flip",
       {3},
       [](GraphBuilder& b, int x) {
         b.output("y", b.timestep_embedding("time_proj", x, 32, true, 0));
       },
       {},
       true},
      {"nd_timestep_embedding_odd_shift",
       {2, 3},
       [](GraphBuilder& b, int x) {
         b.output("y", b.timestep_embedding("add_time_proj", x, 9, false, 1));
       },
       {},
       true},
      // A UNet upsampler on odd latents (4 -> 7, 3 -> 5), and the 2x case; reshape to another
      // value's shape (tokens back to an image).
      {"nd_interpolate_nearest_odd",
       {2, 3, 4, 3},
       [](GraphBuilder& b, int x) {
         b.output("y", b.interpolate_nearest("upsample", x, b.input("skip")));
       },
       {{"skip", {2, 5, 7, 5}}}},
      {"nd_interpolate_nearest_2x",
       {1, 2, 3, 4},
       [](GraphBuilder& b, int x) {
         b.output("y", b.interpolate_nearest("upsample", x, b.input("skip")));
       },
       {{"skip", {1, 1, 6, 8}}}},
      // HunyuanVideo's upsampler: the first frame in space alone, the others in time too.
      {"nd_interpolate_nearest_by_factors",
       {1, 2, 3, 2, 3},
       [](GraphBuilder& b, int x) {
         const int first =
             b.interpolate_nearest_by("first", b.slice("head", x, 2, 0, 1), {1, 2, 2});
         const int rest = b.interpolate_nearest_by("rest", b.slice("tail", x, 2, 1, 3), {2, 2, 2});
         b.output("y", b.concat("upsample", {first, rest}, 2));
       }},
      {"nd_reshape_like_tokens_to_image",
       {2, 12, 5},
       [](GraphBuilder& b, int x) {
         b.output("y", b.reshape_like("to_image", b.permute("channels_first", x, {0, 2, 1}),
                                      b.input("image")));
       },
       {{"image", {2, 5, 3, 4}}}},
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
      {"upsample_nearest2x",
       {2, 3, 5, 7},
       [](GraphBuilder& b, int x) { b.output("y", b.upsample_nearest2x("up", x)); }},
      {"linear_on_image_tokens",
       {2, 6, 5, 4},
       [](GraphBuilder& b, int x) {
         b.output("y", b.linear_last("fc", b.to_tokens("t", x, 6), 6, 9));
       }},
      {"add",
       {2, 3, 6, 5},
       [](GraphBuilder& b, int x) {
         b.output("y", b.add("sum", x, b.unary("r", OpKind::kRelu, x)));
       }},
      {"slice_channels",
       {2, 8, 4, 4},
       [](GraphBuilder& b, int x) { b.output("y", b.slice_channels("s", x, 2, 6)); }},
      {"image_attention", {2, 8, 6, 7}, image_attention(1.0 / std::sqrt(8.0))},
      {"image_attention_2304_positions", {1, 8, 48, 48}, image_attention(1.0)},
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
  NamedTensors in = {{"x", case_input(c, seed)}};
  for (const auto& [name, shape] : c.extra) in.emplace_back(name, random_tensor(shape, seed, name));

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
    EXPECT_LE(err, dt == DType::kF64 ? c.fp64_bound() : 2e-6) << c.name << " " << dtype_name(dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, ReferenceVsTorch, ::testing::ValuesIn(op_cases()),
                         [](const auto& info) { return info.param.name; });

// A case's graph, weights and inputs; `f32_operands` rounds weights and inputs to fp32 first, so
// every path sees the operands the compiled path stores at w=f32,a=f32.
struct Prepared {
  Graph graph;
  Weights weights;
  NamedTensors inputs;
};
Prepared prepare(const OpCase& c, bool f32_operands) {
  GraphBuilder builder("op." + c.name);
  const int x = builder.input("x");
  c.build(builder, x);
  Prepared p{builder.finish(), {}, {}};
  const uint64_t seed = hash_name(c.name);  // seeds come from the case id
  auto round = [&](Tensor t) { return f32_operands ? t.to(DType::kF32).to(DType::kF64) : t; };
  for (const ParamSpec& ps : p.graph.params)
    p.weights.emplace(ps.key, round(random_tensor(ps.shape, seed, ps.key, -0.5, 0.5)));
  p.inputs = {{"x", round(case_input(c, seed))}};
  for (const auto& [name, shape] : c.extra)
    p.inputs.emplace_back(name, round(random_tensor(shape, seed, name)));
  return p;
}

std::vector<OpCase> nd_cases() {
  std::vector<OpCase> out;
  for (const OpCase& c : op_cases())
    if (c.name.rfind("nd_", 0) == 0) out.push_back(c);
  return out;
}

class CompiledNdVsTorch : public ::testing::TestWithParam<OpCase> {};

// The emulated kernels instantiated in fp64, op by op over the graph, on fp32-stored weights:
// the kernels' arithmetic against LibTorch's fp64 without fp32 rounding in between.
TEST_P(CompiledNdVsTorch, KernelsInFp64Agree) {
  const Prepared p = prepare(GetParam(), true);
  const Graph& g = p.graph;
  std::map<std::string, Shape> input_shapes;
  for (const auto& [name, t] : p.inputs) input_shapes[name] = t.shape();
  auto shapes = infer_value_shapes(g, input_shapes);
  ASSERT_TRUE(shapes.ok()) << shapes.error().message();
  compiled::WeightStore store;
  auto f32 = compiled::parse_layer_policy("w=f32,a=f32,acc=f32");
  ASSERT_TRUE(f32.ok());
  const compiled::emulated::ParamLookup param = [&](const std::string& key) {
    bool matrix = false;
    for (const Op& op : g.ops)
      if (op.weight == key && (op.kind == OpKind::kConv || op.kind == OpKind::kLinearLast))
        matrix = true;
    return store.get(p.weights, 1, key, *f32, matrix, {}).value().get();
  };
  std::map<int, Tensor> values;
  for (const auto& [name, v] : g.inputs) values[v] = *find_tensor(p.inputs, name);
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind < OpKind::kConv) {
      // A [B,C,H,W]-kind op among them (affine, GroupNorm, SiLU): its emulated kernels are
      // fp32-only and checked with the VAEs, so the reference computes it here in fp64.
      const Graph one = subgraph(g, {int(i)});
      NamedTensors in;
      for (const auto& [name, v] : one.inputs) in.emplace_back(name, values.at(v));
      auto out = ref::run_graph(one, p.weights, in, DType::kF64);
      ASSERT_TRUE(out.ok()) << op.name << ": " << out.error().message();
      values[op.output] = out->front().second;
      continue;
    }
    std::vector<const Tensor*> in;
    for (int v : op.inputs) in.push_back(&values.at(v));
    values[op.output] =
        compiled::emulated::nd_op<double>(op, in, param, (*shapes)[std::size_t(op.output)]);
  }
  auto theirs = torch_path::run_graph(g, p.weights, p.inputs, DType::kF64);
  ASSERT_TRUE(theirs.ok()) << theirs.error().message();
  const Tensor& want = theirs->front().second;
  const Tensor& got = values.at(g.outputs[0].second);
  ASSERT_EQ(got.shape(), want.shape());
  const double err = testing::relative_l2(got, want);
  EXPECT_LE(err, GetParam().fp64_bound()) << GetParam().name;
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.3e", err);
  RecordProperty("rel_l2", figure);
}

// Through a compiled session on the emulation: at w=f32,a=f32 within the fp32 bound of LibTorch's
// fp64; at w=f16,a=f16 rounded (non-zero error) but within f16's bound.
TEST_P(CompiledNdVsTorch, SessionAgreesWithinTheStorageDtype) {
  const Prepared p = prepare(GetParam(), true);
  auto theirs = torch_path::run_graph(p.graph, p.weights, p.inputs, DType::kF64);
  ASSERT_TRUE(theirs.ok()) << theirs.error().message();
  const Tensor& want = theirs->front().second;
  for (const char* policy : {"w=f32,a=f32,acc=f32", "w=f16,a=f16,acc=f32"}) {
    compiled::SessionOptions options;
    options.policy.base = *compiled::parse_layer_policy(policy);
    compiled::Session session(options);
    auto ours = session.run(p.graph, p.weights, p.inputs);
    ASSERT_TRUE(ours.ok()) << policy << ": " << ours.error().message();
    const Tensor got = ours->front().second.to(DType::kF64);
    ASSERT_EQ(got.shape(), want.shape());
    const double err = testing::relative_l2(got, want);
    const bool f32 = std::string(policy).find("a=f32") != std::string::npos;
    EXPECT_LE(err, f32 ? 2e-6 : 1e-2) << GetParam().name << " " << policy;
    if (!f32) {
      EXPECT_GT(err, 1e-6) << GetParam().name << ": f16 storage must round";
    }
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.3e", err);
    RecordProperty(f32 ? "rel_l2_f32" : "rel_l2_f16", figure);
    // Every group a single N-d op (or an op with its pointwise epilogue), checkpointed.
    ASSERT_EQ(session.plans().size(), 1u);
    EXPECT_TRUE(session.plans()[0]->row_major);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CompiledNdVsTorch, ::testing::ValuesIn(nd_cases()),
                         [](const auto& info) { return info.param.name; });

// LibTorch's parallel ops set the calling thread's OpenMP team size to their own default; the
// torch path gives the caller's back, so the paths that run after it keep their threads (and
// the bits of products whose kernels depend on the team size).
// A frame-causal attention takes its frame size from the video its 4th input is: tokens that
// are not that video's are refused naming both, and an attention causal per frame of no video
// (a hand-made op) is refused rather than read past its inputs.
TEST(FrameCausalAttention, TakesTheFrameSizeFromItsVideo) {
  GraphBuilder b("frames");
  const int video = b.input("video"), tokens = b.input("tokens");
  b.output("y", b.frame_causal_attention("sdpa", tokens, tokens, tokens, 1, 0.5, video));
  Graph g = b.finish();
  auto fits = infer_value_shapes(g, {{"video", {1, 2, 3, 2, 2}}, {"tokens", {1, 12, 4}}});
  ASSERT_TRUE(fits.ok()) << fits.error().message();
  EXPECT_EQ(resolved_attention(g.ops.back(), &fits->at(std::size_t(video))).frame_tokens, 4);
  auto other = infer_value_shapes(g, {{"video", {1, 2, 3, 2, 3}}, {"tokens", {1, 12, 4}}});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("causal frames of [1, 2, 3, 2, 3] for 12"),
            std::string::npos)
      << other.error().message();
  g.ops.back().inputs.pop_back();
  auto none = infer_value_shapes(g, {{"video", {1, 2, 3, 2, 2}}, {"tokens", {1, 12, 4}}});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("a video it is not given"), std::string::npos)
      << none.error().message();
}

TEST(TorchPath, GivesTheCallerItsOpenMpTeamSizeBack) {
  const int threads = omp_get_max_threads();
  GraphBuilder builder("op.conv");
  const int x = builder.input("x");
  builder.output("y", builder.conv2d_same("conv", x, 8, 8, 3));
  const Graph g = builder.finish();
  Weights w;
  for (const ParamSpec& p : g.params) w.emplace(p.key, random_tensor(p.shape, 5, p.key));
  omp_set_num_threads(3);
  auto out =
      torch_path::run_graph(g, w, {{"x", random_tensor({1, 8, 64, 64}, 5, "x")}}, DType::kF32);
  const int after = omp_get_max_threads();
  omp_set_num_threads(threads);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(after, 3);
}

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

// The contract check's fp8 (LibTorch 1.13 has no fp8 dtype: frexp and round-half-even on the
// values) against the bit-level table the compiled path stores with, on every finite code, the
// ties between neighbours and just either side of them, and past the largest finite value:
// layerwise casting's plain cast, saturating and not (docs/design.md, "fp8 in the contract").
TEST(ContractCheckFp8, MatchesTheTableOnEveryCodeAndTie) {
  for (DType dt : {DType::kF8E4M3, DType::kF8E5M2})
    for (Saturation sat : {Saturation::kSaturate, Saturation::kNonSaturating}) {
      std::vector<double> xs{0.0, 464, 465, 500, 480, 1e5, 61440, 57344 * 1.2, -1e9};
      for (uint32_t code = 0; code < 0x7f; ++code) {
        const double v = decode_narrow(dt, code), next = decode_narrow(dt, code + 1);
        if (!std::isfinite(v) || !std::isfinite(next)) continue;
        const double tie = (v + next) / 2;
        for (double x : {v, tie, std::nextafter(tie, 0.0), std::nextafter(tie, 1e9)}) {
          xs.push_back(x);
          xs.push_back(-x);
        }
      }
      Tensor w(DType::kF64, {int64_t(xs.size())});
      std::copy(xs.begin(), xs.end(), w.data<double>());
      ContractParam p;
      p.key = "layer.bias";
      p.bias = true;
      p.dtype = dt;
      p.saturation = sat;
      p.unscaled = true;
      const Tensor got = torch_path::contract_weights(w, p);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const double want = decode_narrow(dt, encode_narrow(dt, xs[i], sat));
        const double g = got.data<double>()[i];
        EXPECT_TRUE(g == want || (std::isnan(g) && std::isnan(want)))
            << dtype_name(dt) << " " << saturation_name(sat) << ": " << xs[i] << " -> " << g
            << ", the table gives " << want;
      }
    }
}

}  // namespace
}  // namespace tp
