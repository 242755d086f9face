// CUDA benchmarks (run on a GPU machine by tools/gpu-run.sh; every benchmark skips without a
// device): the sd-kl decode at 512x512 and 1024x1024 on the compiled path's CUDA kernels per
// dtype policy, beside LibTorch's own CUDA ops (cuDNN, cuBLAS, SDPA) running the same graph in
// f16 and bf16, in the same binary, and the fused groups of that plan one by one; the compiled
// path with each kernel set (per-op and fused, compiled/backend.h); one Wan-1.3B block likewise
// (group table and LibTorch beside it); one sdxl-base `unet.step` at 1024x1024 and the
// hunyuan-video decoder likewise (BM_GraphCall*). Each decode reports
// FLOP/s against vae-facts.md §8's FLOP count and its relative L2 error against LibTorch's CUDA
// fp32 (TF32 off) on the same input.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "compiled/describe_session.h"
#include "compiled/device.h"
#include "compiled/plan.h"
#include "harness/models/family.h"
#include "harness/models/model.h"
#include "harness/models/vae/pipeline.h"
#include "harness/models/vae/vae_graphs.h"
#include "reference/torch/torch_path.h"
#include "tests/bench/bench_support.h"
#include "tests/support/compare.h"

namespace tp {
namespace {

using bench::decoder_flops;
using bench::sd_kl;

// The last: attention's products on tensor cores (attn=act rounds q, k, v and P to f16 first).
const char* const kPolicies[] = {"w=f16,a=f16,acc=f32", "w=bf16,a=bf16,acc=f32",
                                 "w=f8e4m3,a=f16,acc=f32", "w=f8e4m3,a=bf16,acc=f32",
                                 "w=f16,a=f16,acc=f32,attn=act"};

const compiled::CudaKernels kKernels[] = {compiled::CudaKernels::kPerOp,
                                          compiled::CudaKernels::kFused};

Tensor latent_for(int image) { return bench::random_f32({1, 4, image / 8, image / 8}, "latent"); }

// A session on the CUDA kernels `kernels` under `policy`, with its backend kept for the group
// timers (Backend::time_groups) and its notes.
struct CudaSession {
  compiled::Backend* device = nullptr;
  std::unique_ptr<compiled::Session> session;
};
Expected<CudaSession> cuda_session(const char* policy, compiled::CudaKernels kernels,
                                   bool graphs = false) {
  compiled::SessionOptions o;
  TP_ASSIGN_OR_RETURN(o.policy.base, compiled::parse_layer_policy(policy));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<compiled::Backend> backend,
                      compiled::make_cuda_backend(kernels, graphs));
  CudaSession s;
  s.device = backend.get();
  s.session = std::make_unique<compiled::Session>(o, std::move(backend));
  return s;
}

// LibTorch CUDA fp32 output per resolution, computed once.
Expected<Tensor> fp32_output(int image) {
  static std::map<int, Tensor> cache;
  auto it = cache.find(image);
  if (it != cache.end()) return it->second;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<torch_path::Runner> runner,
                      torch_path::Runner::create(sd_kl().weights, DType::kF32, true));
  TP_ASSIGN_OR_RETURN(NamedTensors out, runner->run(build_decoder_graph(vae_config(sd_kl())),
                                                    {{"latents", latent_for(image)}}));
  return cache[image] = out[0].second;
}

void report(benchmark::State& state, int image, const Tensor& out) {
  state.counters["FLOP/s"] =
      benchmark::Counter(decoder_flops(image), benchmark::Counter::kIsIterationInvariantRate);
  auto want = fp32_output(image);
  if (want.ok()) state.counters["rel_l2_vs_fp32"] = testing::relative_l2(out, want.value());
}

void BM_DecodeSdKlCuda(benchmark::State& state) {
  if (cuda_device_count() == 0) return state.SkipWithError("no CUDA device");
  const int image = int(state.range(0));
  const char* policy = kPolicies[state.range(1)];
  const compiled::CudaKernels kernels = kKernels[state.range(2)];
  const bool graphs = state.range(3) != 0;
  auto made = cuda_session(policy, kernels, graphs);
  if (!made.ok()) return state.SkipWithError(made.error().message().c_str());
  const compiled::Backend* device = made->device;
  compiled::Session& session = *made->session;
  const Tensor latent = latent_for(image);
  auto out = run_pipeline(sd_kl(), Pipeline::kDecode, latent, session);  // plans, uploads weights
  if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  if (graphs) out = run_pipeline(sd_kl(), Pipeline::kDecode, latent, session);  // captures
  if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  for (auto _ : state) {
    out = run_pipeline(sd_kl(), Pipeline::kDecode, latent, session);
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  }
  state.SetLabel(std::string(policy) + " " + compiled::cuda_kernels_name(kernels) +
                 (graphs ? " graphs" : ""));
  if (!device->notes().empty()) std::fprintf(stderr, "%s: %s\n", policy, device->notes().c_str());
  state.counters["compile_s"] = session.stats().compile_seconds;
  state.counters["arena_MiB"] = double(session.plans()[0]->stats.arena_bytes) / (1 << 20);
  report(state, image, out.value()[0].second);
}
// The CUDA kernels per fused group, the same groups as reference_bench's BM_GroupEmulated.
void BM_GroupCuda(benchmark::State& state) {
  if (cuda_device_count() == 0) return state.SkipWithError("no CUDA device");
  bench::conv_group_bench(state, compiled::make_cuda_backend(kKernels[state.range(1)]));
  state.SetLabel(state.range(1) ? "fused" : "per-op");
}
BENCHMARK(BM_GroupCuda)
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(bench::kShapes) - 1, 1), {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK(BM_DecodeSdKlCuda)
    ->ArgsProduct({{512, 1024}, {0, 1, 2, 3, 4}, {0, 1}, {0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);
// The same decode replayed as CUDA graphs (TWINPATH_CUDA_GRAPHS=1), f16 and bf16, both kernel
// sets: what the host's launches cost.
BENCHMARK(BM_DecodeSdKlCuda)
    ->ArgsProduct({{512, 1024}, {0, 1}, {0, 1}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

// Work and traffic of one group at the run's shapes: FLOPs of its convs, linears and attention
// products, and the bytes it must move at least (its inputs and outputs in their arena dtypes,
// its weights in the policy's storage dtype).
struct GroupCost {
  double flops = 0, bytes = 0;
};

GroupCost group_cost(const compiled::Plan& plan, const compiled::Group& grp,
                     const std::vector<Shape>& shapes, const Weights& weights) {
  GroupCost c;
  const Graph& g = *plan.graph;
  for (int o : grp.ops) {
    const Op& op = g.ops[std::size_t(o)];
    const double out = double(shape_numel(shapes[std::size_t(op.output)]));
    auto w = weights.find(op.weight);
    if (w != weights.end()) {
      const Shape& ws = w->second.shape();
      c.bytes += double(w->second.numel()) * double(dtype_size(grp.policy.weight));
      if (op.kind == OpKind::kConv) c.flops += 2 * out * double(w->second.numel() / ws[0]);
      if (op.kind == OpKind::kLinearLast) c.flops += 2 * out * double(ws[1]);
    }
    if (op.kind == OpKind::kMultiHeadAttention) {  // q [B,Lq,H*Dh], k [B,Lk,H*Dh], v [B,Lk,H*Dv]
      const Shape &q = shapes[std::size_t(op.inputs[0])], &v = shapes[std::size_t(op.inputs[2])];
      c.flops += 2 * double(q[0]) * double(q[1]) * double(v[1]) * double(q[2] + v[2]);
    }
  }
  for (const auto* values : {&grp.inputs, &grp.outputs})
    for (int v : *values)
      c.bytes += double(shape_numel(shapes[std::size_t(v)])) *
                 double(dtype_size(plan.buffers.at(v).dtype));
  return c;
}

// Prints one plan's device time per group (the backend's events, over the timed runs) beside each
// group's floor: its FLOPs at the dense f16/bf16 tensor-core rate or its bytes at the memory's
// bandwidth, whichever is longer. The table goes to stderr, the totals to the counters.
void print_group_table(benchmark::State& state, const compiled::Plan& plan,
                       const Shape& input_shape, const Weights& weights,
                       const compiled::Backend& device, const std::string& label) {
  constexpr double kPeakFlops = 790e12, kPeakBytes = 3.35e12;  // gpu.md; H100 SXM's HBM3
  const compiled::Backend::GroupTimes t = device.group_times(plan);
  auto shapes = compiled::plan_shapes(plan, input_shape);
  if (t.runs == 0 || !shapes.ok()) return state.SkipWithError("no group times");
  std::fprintf(stderr, "\n| # | group | kind | ms | GFLOP | MB | floor ms | x floor |\n");
  std::fprintf(stderr, "|---|---|---|---|---|---|---|---|\n");
  double total = 0, floor_total = 0;
  for (std::size_t i = 0; i < plan.groups.size(); ++i) {
    const compiled::Group& grp = plan.groups[i];
    const GroupCost c = group_cost(plan, grp, shapes.value(), weights);
    const double ms = t.milliseconds[i] / t.runs,
                 floor = 1e3 * std::max(c.flops / kPeakFlops, c.bytes / kPeakBytes);
    total += ms;
    floor_total += floor;
    std::fprintf(stderr, "| %zu | %s | %s | %.3f | %.1f | %.1f | %.3f | %.1f |\n", i,
                 grp.checkpoints.empty() ? "" : grp.checkpoints[0].c_str(), grp.label().c_str(), ms,
                 c.flops / 1e9, c.bytes / 1e6, floor, ms / floor);
  }
  std::fprintf(stderr, "| | all groups (%s, %d runs) | | %.2f | | | %.2f | %.1f |\n", label.c_str(),
               t.runs, total, floor_total, total / floor_total);
  state.SetLabel(label + ", per-group events");
  state.counters["groups_ms"] = total;
  state.counters["floor_ms"] = floor_total;
}

// The 1024x1024 decode's device time per group (CUDA events between groups, direct launches).
void BM_DecodeSdKlCudaGroups(benchmark::State& state) {
  if (cuda_device_count() == 0) return state.SkipWithError("no CUDA device");
  const int image = int(state.range(0));
  const compiled::CudaKernels kernels = kKernels[state.range(1)];
  auto made = cuda_session(kPolicies[0], kernels);
  if (!made.ok()) return state.SkipWithError(made.error().message().c_str());
  compiled::Backend* device = made->device;
  compiled::Session& session = *made->session;
  const Tensor latent = latent_for(image);
  auto out = run_pipeline(sd_kl(), Pipeline::kDecode, latent, session);
  if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  device->time_groups(true);
  for (auto _ : state) {
    out = run_pipeline(sd_kl(), Pipeline::kDecode, latent, session);
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  }
  print_group_table(state, *session.plans()[0], latent.shape(), sd_kl().weights, *device,
                    std::string(kPolicies[0]) + " " + compiled::cuda_kernels_name(kernels));
}
BENCHMARK(BM_DecodeSdKlCudaGroups)
    ->ArgsProduct({{1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

// LibTorch's CUDA ops on `g` in `dt`, timed after one untimed call (it uploads the weights and
// warms cuDNN); the last output, or nothing once the state carries the error.
std::optional<Tensor> time_torch_cuda(benchmark::State& state, const Weights& weights, DType dt,
                                      const Graph& g, const NamedTensors& in) {
  if (!torch_path::cuda_available()) {
    state.SkipWithError("LibTorch sees no CUDA device");
    return std::nullopt;
  }
  state.SetLabel(std::string("LibTorch CUDA ") + dtype_name(dt));
  auto runner = torch_path::Runner::create(weights, dt, true);
  Expected<NamedTensors> out =
      runner.ok() ? runner.value()->run(g, in) : Expected<NamedTensors>(runner.error());
  if (!out.ok()) {
    state.SkipWithError(out.error().message().c_str());
    return std::nullopt;
  }
  for (auto _ : state) {
    out = runner.value()->run(g, in);
    if (!out.ok()) {
      state.SkipWithError(out.error().message().c_str());
      return std::nullopt;
    }
  }
  return out.value()[0].second;
}

void BM_DecodeSdKlTorchCuda(benchmark::State& state) {
  const int image = int(state.range(0));
  const DType dt = state.range(1) == 0 ? DType::kF16 : DType::kBF16;
  const std::optional<Tensor> out =
      time_torch_cuda(state, sd_kl().weights, dt, build_decoder_graph(vae_config(sd_kl())),
                      {{"latents", latent_for(image)}});
  if (out) report(state, image, *out);
}
BENCHMARK(BM_DecodeSdKlTorchCuda)
    ->ArgsProduct({{512, 1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

// One Wan-1.3B block (its config with num_layers 1, seeded) at 480x832, one latent frame, 512
// text tokens: `wan.step` on the CUDA kernels per policy with the per-group table, and LibTorch's
// CUDA ops running the same graph in bf16 (tools/gpu-run.sh's wan step times diffusers' own).
constexpr const char* kWanBlockConfig =
    R"({"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": null,
 "attention_head_dim": 128, "cross_attn_norm": true, "eps": 1e-06, "ffn_dim": 8960,
 "freq_dim": 256, "image_dim": null, "in_channels": 16, "num_attention_heads": 12,
 "num_layers": 1, "out_channels": 16, "patch_size": [1, 2, 2], "qk_norm": "rms_norm_across_heads",
 "rope_max_seq_len": 1024, "text_dim": 4096})";
// The denoisers' policies (the Wan block, the UNet step): bf16, f16.
const char* const kDenoiserPolicies[] = {"w=bf16,a=bf16,acc=f32", "w=f16,a=f16,acc=f32"};

const Model& wan_block() {
  static const Model m = [] {
    auto made = []() -> Expected<Model> {
      TP_ASSIGN_OR_RETURN(auto config, parse_model_config(nlohmann::json::parse(kWanBlockConfig),
                                                          "the Wan block's config"));
      return seeded_model("wan-block", std::move(config), 0);
    }();
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.error().message().c_str());
      std::abort();
    }
    return std::move(made).value();
  }();
  return m;
}

NamedTensors wan_block_inputs() {
  Tensor t(DType::kF32, {1});
  t.data<float>()[0] = 500;
  NamedTensors in = {{"hidden_states", bench::random_f32({1, 16, 1, 60, 104}, "hidden_states")},
                     {"timestep", t},
                     {"encoder_hidden_states", bench::random_f32({1, 512, 4096}, "text")}};
  auto bound = wan_block().family().bind_inputs(wan_block(), "wan.step", in);
  if (!bound.ok()) std::fprintf(stderr, "%s\n", bound.error().message().c_str());
  return bound.ok() ? bound.value() : in;
}

void BM_WanBlockCudaGroups(benchmark::State& state) {
  if (cuda_device_count() == 0) return state.SkipWithError("no CUDA device");
  const char* policy = kDenoiserPolicies[state.range(0)];
  auto made = cuda_session(policy, compiled::CudaKernels::kFused);
  if (!made.ok()) return state.SkipWithError(made.error().message().c_str());
  compiled::Backend* device = made->device;
  compiled::Session& session = *made->session;
  const Model& m = wan_block();
  const NamedTensors in = wan_block_inputs();
  auto out = m.family().run(m, "wan.step", in, session, {});  // plans, uploads weights
  if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  device->time_groups(true);
  for (auto _ : state) {
    out = m.family().run(m, "wan.step", in, session, {});
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  }
  print_group_table(state, *session.plans()[0], in[0].second.shape(), m.weights, *device, policy);
}
BENCHMARK(BM_WanBlockCudaGroups)
    ->DenseRange(0, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

void BM_WanBlockTorchCuda(benchmark::State& state) {
  const Model& m = wan_block();
  time_torch_cuda(state, m.weights, state.range(0) == 0 ? DType::kBF16 : DType::kF16,
                  m.family().graphs(*m.config).at(0), wan_block_inputs());
}
BENCHMARK(BM_WanBlockTorchCuda)
    ->DenseRange(0, 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

// One graph of a seeded built-in model beside LibTorch's CUDA ops on the same graph: one
// sdxl-base `unet.step` at 1024x1024 (latent 128x128, 77 text tokens, CFG off) and the
// hunyuan-video decoder untiled (5 latent frames = 17 video frames at 256x256). FLOP/s counts
// every conv, linear and attention product at the call's shapes (the decoder's frame-causal
// attention counted whole), rel L2 is against LibTorch CUDA fp32 (TF32 off) on the same inputs.
struct GraphCall {
  Model model;
  Graph graph;
  NamedTensors inputs;
  double flops = 0;
};

const GraphCall& graph_call(int which) {
  static std::map<int, GraphCall> calls;
  auto it = calls.find(which);
  if (it != calls.end()) return it->second;
  GraphCall c;
  auto made = make_model(which == 0 ? "sdxl-base" : "hunyuan-video", 0);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.error().message().c_str());
    std::abort();
  }
  c.model = std::move(made).value();
  const std::vector<Graph> graphs = c.model.family().graphs(*c.model.config);
  c.graph = which == 0 ? graphs.at(0) : graphs.at(1);
  c.inputs = which == 0 ? bench::unet_step_inputs(c.model, 128)
                        : NamedTensors{{"latents", bench::random_f32({1, 16, 5, 32, 32}, "hv")}};
  c.flops = bench::graph_flops(c.graph, c.inputs);
  return calls[which] = std::move(c);
}

const char* const kCallNames[] = {"sdxl-base unet.step 1024^2", "hunyuan-video decode 17x256^2"};

Expected<Tensor> torch_cuda_output(int which, DType dt) {
  const GraphCall& c = graph_call(which);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<torch_path::Runner> runner,
                      torch_path::Runner::create(c.model.weights, dt, true));
  TP_ASSIGN_OR_RETURN(NamedTensors out, runner->run(c.graph, c.inputs));
  return out[0].second;
}

void report_call(benchmark::State& state, int which, const Tensor& out, const std::string& label) {
  const GraphCall& c = graph_call(which);
  state.counters["FLOP/s"] =
      benchmark::Counter(c.flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP"] = c.flops / 1e12;
  state.counters["floor_ms"] = c.flops / 790e12 * 1e3;  // gpu.md's dense f16/bf16 rate
  static std::map<int, Tensor> fp32;
  if (!fp32.count(which)) {
    auto want = torch_cuda_output(which, DType::kF32);
    if (want.ok()) fp32[which] = want.value();
  }
  if (fp32.count(which)) state.counters["rel_l2_vs_fp32"] = testing::relative_l2(out, fp32[which]);
  state.SetLabel(std::string(kCallNames[which]) + " " + label);
}

// range(0): the call; range(1): kDenoiserPolicies' index (bf16, f16). Fused kernels, direct
// launches, with the per-group table.
void BM_GraphCallCuda(benchmark::State& state) {
  if (cuda_device_count() == 0) return state.SkipWithError("no CUDA device");
  const int which = int(state.range(0));
  const char* policy = kDenoiserPolicies[state.range(1)];
  const GraphCall& c = graph_call(which);
  auto made = cuda_session(policy, compiled::CudaKernels::kFused);
  if (!made.ok()) return state.SkipWithError(made.error().message().c_str());
  compiled::Backend* device = made->device;
  compiled::Session& session = *made->session;
  auto out = session.run(c.graph, c.model.weights, c.inputs);  // plans, uploads weights
  if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  device->time_groups(true);
  for (auto _ : state) {
    out = session.run(c.graph, c.model.weights, c.inputs);
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  }
  print_group_table(state, *session.plans()[0], c.inputs[0].second.shape(), c.model.weights,
                    *device, policy);
  state.counters["compile_s"] = session.stats().compile_seconds;
  report_call(state, which, out.value()[0].second, policy);
}
BENCHMARK(BM_GraphCallCuda)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

void BM_GraphCallTorchCuda(benchmark::State& state) {
  const int which = int(state.range(0));
  const DType dt = state.range(1) == 0 ? DType::kBF16 : DType::kF16;
  const GraphCall& c = graph_call(which);
  const std::optional<Tensor> out = time_torch_cuda(state, c.model.weights, dt, c.graph, c.inputs);
  if (out) report_call(state, which, *out, std::string("LibTorch CUDA ") + dtype_name(dt));
}
BENCHMARK(BM_GraphCallTorchCuda)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

}  // namespace
}  // namespace tp

int main(int argc, char** argv) {
  benchmark::AddCustomContext(
      "device", tp::cuda_device_count() > 0 ? tp::cuda_device_description(0) : "none");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
