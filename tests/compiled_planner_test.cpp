// The compiled path's plan-time pieces: fused groups (image and N-d ops), the refusals of
// unsupported layers, checkpoint names, stored weights, and the arena's liveness-based reuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "compiled/backend.h"
#include "compiled/fused_groups.h"
#include "compiled/planner.h"
#include "harness/models/family.h"
#include "harness/models/vae/vae_graphs.h"
#include "tests/support/fixtures.h"

namespace tp::compiled {
namespace {

class PlannerTest : public ::testing::Test {
 protected:
  static const Group* group_with_op(const std::vector<Group>& groups, const Graph& g,
                                    const std::string& op_name) {
    for (const Group& grp : groups)
      for (int o : grp.ops)
        if (g.ops[std::size_t(o)].name == op_name) return &grp;
    return nullptr;
  }
  static std::vector<std::string> names(const Graph& g, const Group& grp) {
    std::vector<std::string> n;
    for (int o : grp.ops) n.push_back(g.ops[std::size_t(o)].name);
    return n;
  }
  Model model_ = testing::fixture_model("tiny-kl");
};

TEST_F(PlannerTest, EveryOpRunsInExactlyOneGroupAfterItsInputs) {
  for (const Graph& g :
       {build_encoder_graph(vae_config(model_)), build_decoder_graph(vae_config(model_))}) {
    const std::vector<Group> groups = partition_into_groups(g);
    std::vector<int> seen(g.ops.size(), 0);
    std::set<int> ready;
    for (const auto& [n, v] : g.inputs) ready.insert(v);
    for (const Group& grp : groups) {
      for (int v : grp.inputs)
        EXPECT_TRUE(ready.count(v)) << g.value_names[std::size_t(v)] << " read before it is stored";
      for (int o : grp.ops) ++seen[std::size_t(o)];
      for (int v : grp.outputs) ready.insert(v);
      EXPECT_EQ(grp.outputs.size(), grp.checkpoints.size());
    }
    for (std::size_t i = 0; i < g.ops.size(); ++i) EXPECT_EQ(seen[i], 1) << g.ops[i].name;
    EXPECT_LT(groups.size(), g.ops.size() * 2 / 3)
        << "fusion should remove at least a third of the stores";
  }
}

TEST_F(PlannerTest, FusesTheContractsGroups) {
  const Graph dec = build_decoder_graph(vae_config(model_));
  const std::vector<Group> groups = partition_into_groups(dec);
  // GroupNorm + SiLU.
  const Group* gn = group_with_op(groups, dec, "decoder.up_blocks.0.resnets.0.norm1");
  ASSERT_NE(gn, nullptr);
  EXPECT_EQ(names(dec, *gn), (std::vector<std::string>{"decoder.up_blocks.0.resnets.0.norm1",
                                                       "decoder.up_blocks.0.resnets.0.act1"}));
  // conv + bias + residual add, checkpointed under the resnet's module path.
  const Group* conv2 = group_with_op(groups, dec, "decoder.up_blocks.0.resnets.0.conv2");
  ASSERT_NE(conv2, nullptr);
  EXPECT_EQ(names(dec, *conv2), (std::vector<std::string>{"decoder.up_blocks.0.resnets.0.conv2",
                                                          "decoder.up_blocks.0.resnets.0.add"}));
  EXPECT_EQ(conv2->checkpoints, std::vector<std::string>{"decoder.up_blocks.0.resnets.0"});
  // nearest upsample + conv: the upsampled tensor is never stored.
  const Group* up = group_with_op(groups, dec, "decoder.up_blocks.0.upsamplers.0.interpolate");
  ASSERT_NE(up, nullptr);
  EXPECT_TRUE(up->upsample_prologue);
  EXPECT_EQ(up->kind, GroupKind::kConv);
  EXPECT_EQ(up->checkpoints, std::vector<std::string>{"decoder.up_blocks.0.upsamplers.0"});
  // The attention block: token views, projections, softmax, output projection, the views back
  // and the residual in one group, channels-last (the views are the image's memory).
  EXPECT_FALSE(dec.has_nd_ops());
  const Group* attn = group_with_op(groups, dec, "decoder.mid_block.attentions.0.sdpa");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->kind, GroupKind::kAttention);
  EXPECT_EQ(names(dec, *attn),
            (std::vector<std::string>{
                "decoder.mid_block.attentions.0.to_tokens.flatten",
                "decoder.mid_block.attentions.0.to_tokens", "decoder.mid_block.attentions.0.to_q",
                "decoder.mid_block.attentions.0.to_k", "decoder.mid_block.attentions.0.to_v",
                "decoder.mid_block.attentions.0.sdpa", "decoder.mid_block.attentions.0.to_out.0",
                "decoder.mid_block.attentions.0.to_image.channels_first",
                "decoder.mid_block.attentions.0.to_image", "decoder.mid_block.attentions.0.add"}));
  EXPECT_EQ(attn->checkpoints, std::vector<std::string>{"decoder.mid_block.attentions.0"});

  // The DiagonalGaussian tail: quant_conv, both slices and the logvar clamp, two outputs.
  const Graph enc = build_encoder_graph(vae_config(model_));
  const std::vector<Group> eg = partition_into_groups(enc);
  const Group* tail = group_with_op(eg, enc, "quant_conv");
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(names(enc, *tail),
            (std::vector<std::string>{"quant_conv", "posterior.mean", "posterior.logvar_unclamped",
                                      "posterior.logvar"}));
  EXPECT_EQ(tail->checkpoints, (std::vector<std::string>{"posterior.mean", "posterior.logvar"}));
}

TEST_F(PlannerTest, ArenaReusesDeadBuffersAndNeverOverlapsLiveOnes) {
  WeightStore store;
  const Graph dec = build_decoder_graph(vae_config(model_));
  PlanRequest r{&dec,
                &model_.weights,
                weights_identity(model_.weights),
                {1, 4, 16, 16},
                DTypePolicy{parse_layer_policy("w=f16,a=f16").value(), {}},
                {},
                "cpu-emulated",
                {}};
  auto plan = compile_plan(r, store);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const Plan& p = *plan.value();
  EXPECT_LT(p.stats.arena_bytes, p.stats.unshared_bytes / 2);
  for (const auto& [va, a] : p.buffers)
    for (const auto& [vb, b] : p.buffers) {
      if (va >= vb) continue;
      const bool live_together = a.first_group <= b.last_group && b.first_group <= a.last_group;
      const bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(live_together && overlap)
          << dec.value_names[std::size_t(va)] << " and " << dec.value_names[std::size_t(vb)];
      EXPECT_LE(a.offset + a.bytes, p.stats.arena_bytes);
    }
}

// plan_shapes remembers a few input shapes per plan: whichever order the shapes come in, and past
// the memo's size, it gives what shape inference gives.
TEST_F(PlannerTest, PlanShapesAgreeWithShapeInferenceAtEveryShapeInAnyOrder) {
  WeightStore store;
  const Graph dec = build_decoder_graph(vae_config(model_));
  PlanRequest r{&dec,
                &model_.weights,
                weights_identity(model_.weights),
                {1, 4, 8, 8},
                DTypePolicy{parse_layer_policy("w=f16,a=f16").value(), {}},
                {},
                "cpu-emulated",
                {}};
  auto plan = compile_plan(r, store);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const Plan copy = *plan.value();  // shares the memo
  std::vector<Shape> inputs;
  for (int64_t side = 4; side < 4 + 2 * int64_t(ShapeMemo::kEntries) + 2; side += 2)
    inputs.push_back({1, 4, side, side + 2});
  for (int pass = 0; pass < 3; ++pass)
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Shape& in = inputs[pass == 1 ? inputs.size() - 1 - i : i];
      const auto want = infer_shapes(dec, in, {});
      const auto got = plan_shapes(pass == 2 ? copy : *plan.value(), in);
      ASSERT_TRUE(want.ok() && got.ok());
      EXPECT_EQ(*got, *want) << "input " << in[2] << "x" << in[3] << ", pass " << pass;
    }
}

// The CUDA backend's fused kernel set takes a group only where its fused form has the group's
// rounding points: every conv [+ residual add] (with or without the upsample prologue) and every
// GroupNorm [+ SiLU] of the decoder, nothing else; none under f16 accumulation (convs) or a
// fault the fused kernels do not reproduce.
TEST_F(PlannerTest, FusedKernelSetTakesConvAndNormGroupsWithTheirRoundingPoints) {
  WeightStore store;
  const Graph dec = build_decoder_graph(vae_config(model_));
  auto plan_for = [&](const char* policy, FaultSet faults) {
    PlanRequest r{&dec,
                  &model_.weights,
                  weights_identity(model_.weights),
                  {1, 4, 8, 8},
                  DTypePolicy{parse_layer_policy(policy).value(), {}},
                  faults,
                  "cpu-emulated",
                  {}};
    auto plan = compile_plan(r, store);
    EXPECT_TRUE(plan.ok()) << plan.error().message();
    return std::move(plan).value();
  };
  const auto plan = plan_for("w=f16,a=f16", {});
  int convs = 0, norms = 0, residuals = 0, upsamples = 0, silus = 0;
  for (const Group& grp : plan->groups) {
    const auto conv = match_conv_epilogue(*plan, grp);
    const auto norm = match_norm_activation(*plan, grp);
    EXPECT_EQ(conv.has_value(), grp.kind == GroupKind::kConv) << names(dec, grp)[0];
    EXPECT_EQ(norm.has_value(), grp.kind == GroupKind::kGroupNorm) << names(dec, grp)[0];
    if (conv) {
      ++convs;
      const Op& op = dec.ops[std::size_t(conv->conv)];
      EXPECT_TRUE(conv2d_window(op)) << op.name;
      EXPECT_EQ(conv->upsample >= 0, grp.upsample_prologue);
      EXPECT_EQ(conv->input, dec.ops[std::size_t(grp.ops[0])].inputs[0]);
      if (conv->add >= 0) {
        ++residuals;
        EXPECT_NE(conv->residual, op.output);
        EXPECT_NE(std::find(grp.inputs.begin(), grp.inputs.end(), conv->residual), grp.inputs.end())
            << "the residual is read from outside the group";
      }
      upsamples += conv->upsample >= 0;
    }
    if (norm) {
      ++norms;
      silus += norm->silu >= 0;
    }
  }
  // tiny-kl's decoder: post_quant_conv, conv_in, 2 per resnet and conv_out, two upsamplers;
  // GroupNorm before every resnet conv, the attention and conv_out.
  EXPECT_GT(convs, 10);
  EXPECT_GT(residuals, 3);
  EXPECT_EQ(upsamples, 2);
  EXPECT_GT(norms, 10);
  EXPECT_GT(silus, 10);
  EXPECT_LT(silus, norms) << "the attention's GroupNorm has no SiLU";

  // Each fused conv's implicit-GEMM problem is consistent: cuDNN's output size from the
  // (upsampled) input, the kernel, stride and the four paddings is the conv's own, and the
  // weights hold k x r x s x c values. The encoder's downsamplers pad bottom and right only.
  auto check_problems = [&](const Plan& plan, const Shape& in) -> int {
    const auto shapes = plan_shapes(plan, in);
    EXPECT_TRUE(shapes.ok()) << shapes.error().message();
    if (!shapes.ok()) return -1;
    int asymmetric = 0;
    for (const Group& grp : plan.groups) {
      const auto m = match_conv_epilogue(plan, grp);
      if (!m) continue;
      const Op& op = plan.graph->ops[std::size_t(m->conv)];
      const ConvProblem p = conv_problem(plan, *m, (*shapes)[std::size_t(m->input)],
                                         (*shapes)[std::size_t(op.output)], DType::kF16);
      EXPECT_EQ((p.h + p.pad_top + p.pad_bottom - p.r) / p.stride + 1, p.ho) << p.describe();
      EXPECT_EQ((p.w + p.pad_left + p.pad_right - p.s) / p.stride + 1, p.wo) << p.describe();
      EXPECT_EQ(plan.params.at(op.weight)->count(), p.k * p.r * p.s * p.c) << p.describe();
      if (m->upsample >= 0) {
        EXPECT_EQ(p.h, 2 * (*shapes)[std::size_t(m->input)][2]) << p.describe();
      }
      asymmetric += p.pad_top != p.pad_bottom;
    }
    return asymmetric;
  };
  EXPECT_EQ(check_problems(*plan, {1, 4, 8, 8}), 0) << "the decoder pads symmetrically";
  const auto f16_acc = plan_for("w=f16,a=f16,acc=f16", {});
  for (const Group& grp : f16_acc->groups) {
    EXPECT_FALSE(match_conv_epilogue(*f16_acc, grp)) << "f16 accumulation stays per-op";
    EXPECT_EQ(match_norm_activation(*f16_acc, grp).has_value(), grp.kind == GroupKind::kGroupNorm);
  }
  FaultSet fault;
  fault.add(Fault::kF16StoreTruncate);
  const auto faulty = plan_for("w=f16,a=f16", fault);
  for (const Group& grp : faulty->groups) {
    EXPECT_FALSE(match_conv_epilogue(*faulty, grp));
    EXPECT_FALSE(match_norm_activation(*faulty, grp));
  }

  // The encoder's DiagonalGaussian tail stores two values: not a fused conv.
  const Graph enc = build_encoder_graph(vae_config(model_));
  PlanRequest r{&enc,
                &model_.weights,
                weights_identity(model_.weights),
                {1, 3, 16, 16},
                DTypePolicy{parse_layer_policy("w=f16,a=f16").value(), {}},
                {},
                "cpu-emulated",
                {}};
  auto encoder = compile_plan(r, store);
  ASSERT_TRUE(encoder.ok()) << encoder.error().message();
  const Group* tail = group_with_op((*encoder)->groups, enc, "quant_conv");
  ASSERT_NE(tail, nullptr);
  EXPECT_FALSE(match_conv_epilogue(**encoder, *tail));
  EXPECT_GT(check_problems(**encoder, {1, 3, 16, 16}), 0) << "the downsamplers' padding";
}

TEST_F(PlannerTest, RefusesAnUnsupportedCombinationAtPlanTimeNamingTheFirstLayer) {
  WeightStore store;
  const Graph dec = build_decoder_graph(vae_config(model_));
  PlanRequest r{&dec,
                &model_.weights,
                1,
                {1, 4, 8, 8},
                DTypePolicy{parse_layer_policy("w=bf16,a=f16").value(), {}},
                {},
                "cpu-emulated",
                {}};
  auto plan = compile_plan(r, store);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(
      plan.error().message().rfind("post_quant_conv: weights in bf16 with activations in f16", 0),
      0u)
      << plan.error().message();
  EXPECT_EQ(store.count(), 0u) << "nothing is prepared for a refused plan";
  // Keeping the offending layers in fp32 is one of the fixes the message offers.
  r.policy.keep_fp32 = {"*"};
  EXPECT_TRUE(compile_plan(r, store).ok());
}

TEST_F(PlannerTest, KeptLayersStoreFp32AndFp8WeightsCarryScales) {
  WeightStore store;
  const Graph dec = build_decoder_graph(vae_config(model_));
  PlanRequest r{&dec,
                &model_.weights,
                7,
                {1, 4, 8, 8},
                DTypePolicy{parse_layer_policy("w=f8e4m3,a=bf16").value(), {"decoder.conv_out"}},
                {},
                "cpu-emulated",
                {}};
  auto plan = compile_plan(r, store);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  for (const Group& grp : plan.value()->groups) {
    const bool kept = dec.ops[std::size_t(grp.ops[0])].name == "decoder.conv_out";
    EXPECT_EQ(grp.policy.activation, kept ? DType::kF32 : DType::kBF16);
    for (int v : grp.outputs) EXPECT_EQ(plan.value()->buffers.at(v).dtype, grp.policy.activation);
  }
  const PreparedParam& conv_in = *plan.value()->params.at("decoder.conv_in.weight");
  EXPECT_EQ(conv_in.storage, DType::kF8E4M3);
  ASSERT_EQ(conv_in.scales.size(), std::size_t(conv_in.shape[0]));
  for (float s : conv_in.scales) EXPECT_GT(s, 0.0f);
  EXPECT_EQ(plan.value()->params.at("decoder.conv_in.bias")->storage, DType::kF32)
      << "biases carry no scale";
  EXPECT_EQ(plan.value()->params.at("decoder.conv_out.weight")->storage, DType::kF32);
}

// clip=Q: each scale maps the Q-quantile of |w| (nearest rank, per output channel) to 448; the
// weights above it saturate to 448 x scale, or overflow to NaN (e4m3 has no inf) past the
// midpoint 464 with sat=nonsat.
TEST_F(PlannerTest, ClippedFp8ScalesSaturateOrOverflowTheWeightsAboveTheQuantile) {
  const Graph dec = build_decoder_graph(vae_config(model_));
  const Tensor w = model_.weights.at("decoder.conv_in.weight").to(DType::kF64);
  const int64_t rows = w.shape()[0], per_row = w.numel() / rows;
  for (const char* sat : {"satfinite", "nonsat"}) {
    WeightStore store;
    PlanRequest r{
        &dec,
        &model_.weights,
        7,
        {1, 4, 8, 8},
        DTypePolicy{parse_layer_policy(std::string("w=f8e4m3,a=f16,clip=0.75,sat=") + sat).value(),
                    {}},
        {},
        "cpu-emulated",
        {}};
    auto plan = compile_plan(r, store);
    ASSERT_TRUE(plan.ok()) << plan.error().message();
    const PreparedParam& p = *plan.value()->params.at("decoder.conv_in.weight");
    ASSERT_EQ(p.scales.size(), std::size_t(rows));
    int64_t above = 0, overflowed = 0, saturated = 0;
    const ParamFloats values(p);
    for (int64_t o = 0; o < rows; ++o) {
      std::vector<double> a(static_cast<std::size_t>(per_row));
      for (int64_t i = 0; i < per_row; ++i)
        a[std::size_t(i)] = std::fabs(w.data<double>()[o * per_row + i]);
      std::sort(a.begin(), a.end());
      const double q = a[std::size_t(std::ceil(0.75 * double(per_row)) - 1)];
      EXPECT_EQ(p.scales[std::size_t(o)], float(q / 448)) << "row " << o;
      for (double x : a) above += x / double(p.scales[std::size_t(o)]) > 464;
      for (int64_t i = 0; i < per_row; ++i) {
        const float v = values.data()[o * per_row + i];
        overflowed += std::isnan(v);
        saturated += std::fabs(v) == 448.0f;
      }
    }
    EXPECT_GT(above, 0) << "a 0.75 quantile leaves weights above the range";
    if (std::string(sat) == "nonsat") {
      EXPECT_EQ(overflowed, above);
    } else {
      EXPECT_EQ(overflowed, 0);
      EXPECT_GE(saturated, above);
    }
  }
  EXPECT_FALSE(parse_layer_policy("w=f16,a=f16,clip=0.9").ok()) << "clip= is fp8's";
  EXPECT_FALSE(parse_layer_policy("w=f8e4m3,a=f16,clip=0").ok());
  EXPECT_EQ(layer_policy_string(parse_layer_policy("w=f8e5m2,a=bf16,clip=0.999").value()),
            "w=f8e5m2,a=bf16,acc=f32,scale=channel,sat=satfinite,clip=0.999");
}

// attn=act: the rounding point travels with the policy text (plan files, cache keys, reports)
// and into the group's contract; with a=f32 there is nothing to round to.
TEST_F(PlannerTest, AttentionOperandsInTheActivationDtypeAreAPolicyWithAContractRow) {
  auto act_or_not = [](bool act) {
    return parse_layer_policy(act ? "w=f16,a=f16,attn=act" : "w=f16,a=f16").value();
  };
  const LayerPolicy act = parse_layer_policy("w=f16,a=bf16,attn=act").value();
  EXPECT_TRUE(act.attention_in_activation);
  EXPECT_EQ(act.attention_operands(), DType::kBF16);
  EXPECT_EQ(layer_policy_string(act), "w=f16,a=bf16,acc=f32,attn=act");
  EXPECT_EQ(parse_layer_policy(layer_policy_string(act)).value(), act);
  EXPECT_EQ(parse_layer_policy("w=f16,a=f16,attn=f32").value().attention_operands(), DType::kF32);
  const auto f32 = parse_layer_policy("w=f32,a=f32,attn=act");
  ASSERT_FALSE(f32.ok());
  EXPECT_NE(f32.error().message().find("a=f32 has nothing to round them to"), std::string::npos);
  const auto unknown = parse_layer_policy("w=f16,a=f16,attn=f16");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("use attn=act"), std::string::npos);

  WeightStore store;
  const Graph dec = build_decoder_graph(vae_config(model_));
  for (bool rounded : {false, true}) {
    PlanRequest r{&dec,
                  &model_.weights,
                  weights_identity(model_.weights),
                  {1, 4, 8, 8},
                  DTypePolicy{act_or_not(rounded), {}},
                  {},
                  "cpu-emulated",
                  {}};
    auto plan = compile_plan(r, store);
    ASSERT_TRUE(plan.ok()) << plan.error().message();
    int attention_rows = 0;
    for (const ContractRow& row : plan_contract_rows(**plan))
      if (row.point == "attention") {
        ++attention_rows;
        EXPECT_EQ(row.dtype, "f16");
      }
    EXPECT_EQ(attention_rows, rounded ? 1 : 0) << "one attention group in tiny-kl's decoder";
  }
}

// The image ops are N-d kinds whose attributes pick the image kernels: a graph of them plans
// channels-last, a residual add whose shortcut conv comes after conv2 (diffusers' order) fuses
// into conv2's group, and a broadcasting add there is refused with the fix.
TEST(PlannerNd, ImageOpsPlanChannelsLastAndFuseTheShortcutResidual) {
  auto block = [](bool broadcast) {
    GraphBuilder b("resnet");
    const int x = b.input("sample");
    const int h = b.conv2d_same("conv2", x, 4, 8, 3);
    const int shortcut = b.conv2d_same("conv_shortcut", x, 4, 8, 1);
    const int other = broadcast ? b.input("shift") : shortcut;
    const int sum = b.slice_channels("half", b.add("add", other, h), 0, 4);
    b.output("y", b.upsample_nearest2x("up", sum));
    return b.finish();
  };
  const Graph g = block(false);
  for (const Op& op : g.ops) EXPECT_FALSE(runs_nd(op)) << op.name;
  EXPECT_EQ(op_label(g.ops[0]), "conv2d");
  Weights w;
  for (const ParamSpec& p : g.params) w.emplace(p.key, Tensor(DType::kF32, p.shape));
  WeightStore store;
  PlanRequest r{
      &g, &w, 1, {1, 4, 4, 4}, {*parse_layer_policy("w=f16,a=f16,acc=f32"), {}}, {}, "cpu-emulated",
      {}};
  auto plan = compile_plan(r, store);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_FALSE((*plan)->row_major);
  bool fused = false;
  for (const Group& grp : (*plan)->groups) {
    std::vector<std::string> names;
    for (int o : grp.ops) names.push_back(g.ops[std::size_t(o)].name);
    fused = fused || names == std::vector<std::string>{"conv2", "add", "half"};
  }
  EXPECT_TRUE(fused) << "conv2, the residual add and the slice in one group";
  const Graph wide = block(true);
  Weights ww;
  for (const ParamSpec& p : wide.params) ww.emplace(p.key, Tensor(DType::kF32, p.shape));
  r.graph = &wide;
  r.weights = &ww;
  r.other_inputs = {{1, 8, 1, 1}};
  auto refused = compile_plan(r, store);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("add broadcasts [1, 8, 1, 1] and [1, 8, 4, 4]"),
            std::string::npos)
      << refused.error().message();
}

// A plan of N-d ops is row-major; ops outside the fused patterns run one per group with their
// epilogue; f16 accumulation is refused naming the layer, a missing input shape too.
TEST(PlannerNd, PlansNdGraphsRowMajorAndRefusesF16Accumulation) {
  GraphBuilder b("dit.block");
  const int x = b.input("hidden_states");
  const int ctx = b.input("encoder_hidden_states");
  const int h = b.layer_norm("norm1", x, {8}, 1e-6, false);
  const int q = b.linear_last("attn2.to_q", h, 8, 8, false);
  const int k = b.linear_last("attn2.to_k", ctx, 6, 8, false);
  const int v = b.linear_last("attn2.to_v", ctx, 6, 8, false);
  const int a = b.multi_head_attention("attn2", q, k, v, 2, 0.5);
  b.output("y", b.gelu("ff.net.0", b.unary("act", OpKind::kSilu, a), true));
  const Graph g = b.finish();
  Weights w;
  for (const ParamSpec& p : g.params) w.emplace(p.key, Tensor(DType::kF32, p.shape));
  WeightStore store;
  PlanRequest r{
      &g, &w, 1, {1, 4, 8}, {*parse_layer_policy("w=f16,a=f16,acc=f32"), {}}, {}, "cpu-emulated",
      {}};
  r.other_inputs = {{1, 3, 6}};
  auto plan = compile_plan(r, store);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_TRUE((*plan)->row_major);
  // norm1 with its one projection (to_q), to_k, to_v, and the attention (no to_out: no
  // attention pattern) with the SiLU and GELU after it as its epilogue.
  ASSERT_EQ((*plan)->groups.size(), 4u);
  for (const Group& grp : (*plan)->groups) EXPECT_EQ(grp.kind, GroupKind::kTensor);
  EXPECT_EQ((*plan)->groups[0].ops.size(), 2u);
  EXPECT_EQ((*plan)->buffers.at(ctx).shape, (Shape{1, 3, 6}));
  // A plan of N-d ops for a missing second input shape is refused, not guessed.
  PlanRequest missing = r;
  missing.other_inputs.clear();
  auto refused = compile_plan(missing, store);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), "dit.block takes 2 inputs, given 1");
  PlanRequest f16_acc = r;
  f16_acc.policy.base = *parse_layer_policy("w=f16,a=f16,acc=f16");
  auto acc = compile_plan(f16_acc, store);
  ASSERT_FALSE(acc.ok());
  EXPECT_NE(acc.error().message().find("norm1: weights in f16 with activations in f16 cannot "
                                       "accumulate in f16 in layer_norm"),
            std::string::npos)
      << acc.error().message();
}

// The UNet's transformer block fused as a kernel library would: each attention with its norm,
// projections and residual; norm3 with the GEGLU projection, split, GELU and product; the
// output projection with its residual; the time embedding's add in its projection's group.
TEST_F(PlannerTest, FusesTheUnetsTransformerBlockAndResnet) {
  auto config = parse_model_config(nlohmann::json::parse(builtin_config_text("tiny-unet").value()),
                                   "tiny-unet");
  ASSERT_TRUE(config.ok()) << config.error().message();
  const Graph g = (*config)->family().graphs(**config).at(0);
  const std::vector<Group> groups = partition_into_groups(g);
  const std::string p = "down_blocks.0.attentions.0.transformer_blocks.0.";
  auto expect_group = [&](const std::string& op, const std::vector<std::string>& ops,
                          const std::vector<std::string>& checkpoints) {
    const Group* grp = group_with_op(groups, g, op);
    ASSERT_NE(grp, nullptr) << op;
    EXPECT_EQ(names(g, *grp), ops) << op;
    EXPECT_EQ(grp->checkpoints, checkpoints) << op;
  };
  for (const char* attn : {"attn1", "attn2"}) {
    const std::string a = p + attn, norm = p + (attn == std::string("attn1") ? "norm1" : "norm2");
    expect_group(a + ".sdpa",
                 {norm, a + ".to_q", a + ".to_k", a + ".to_v", a + ".sdpa", a + ".to_out.0",
                  a + ".residual"},
                 {a + ".residual"});
    EXPECT_EQ(group_with_op(groups, g, a + ".sdpa")->kind, GroupKind::kAttention);
  }
  expect_group(p + "ff.net.0.proj",
               {p + "norm3", p + "ff.net.0.proj", p + "ff.net.0.hidden", p + "ff.net.0.gate",
                p + "ff.net.0.gelu", p + "ff.net.0.mul"},
               {p + "ff.net.0"});
  expect_group(p + "ff.net.2", {p + "ff.net.2", p + "ff.residual"}, {p.substr(0, p.size() - 1)});
  const std::string r = "down_blocks.0.resnets.0.";
  expect_group(r + "time_emb_proj",
               {r + "time_emb_proj", r + "time_emb_proj.unsqueeze", r + "add_time"},
               {r + "add_time"});
  // Every group reads only values stored before it.
  std::set<int> ready;
  for (const auto& [n, v] : g.inputs) ready.insert(v);
  for (const Group& grp : groups) {
    for (int v : grp.inputs) EXPECT_TRUE(ready.count(v)) << g.value_names[std::size_t(v)];
    for (int v : grp.outputs) ready.insert(v);
  }
}

}  // namespace
}  // namespace tp::compiled
