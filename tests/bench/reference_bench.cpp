// Reference conv2d on the SD-VAE's conv shapes and a whole sd-kl decode at 256x256, each
// beside LibTorch's CPU ops doing the same work in the same binary, the compiled path's
// emulated kernels on the same decode per dtype policy, plus a large Eigen SGEMM as the
// machine's measured FLOP/s ceiling. All use the same number of threads.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>

#include "compiled/compiled_pipeline.h"
#include "tests/bench/bench_support.h"
#include "harness/pipeline.h"
#include "harness/vae_graphs.h"
#include "reference/executor.h"
#include "reference/torch/torch_path.h"

namespace tp {
namespace {

using bench::decoder_flops;
using bench::random_f32;
using bench::sd_kl;

struct ConvShape {
  const char* where;  // the diffusers module it stands for, at a 256x256 image
  int cin, cout, k, stride, h, w;
  bool asymmetric_pad;  // Downsample2D: pad (0,1,0,1)
};

const ConvShape kShapes[] = {
    {"decoder.conv_in", 4, 512, 3, 1, 32, 32, false},
    {"decoder.mid_block.resnets.*.conv*", 512, 512, 3, 1, 32, 32, false},
    {"decoder.up_blocks.1.resnets.*.conv*", 512, 512, 3, 1, 64, 64, false},
    {"decoder.up_blocks.2.resnets.0.conv1", 512, 256, 3, 1, 128, 128, false},
    {"decoder.up_blocks.2.resnets.0.conv_shortcut", 512, 256, 1, 1, 128, 128, false},
    {"decoder.up_blocks.2.upsamplers.0.conv", 256, 256, 3, 1, 256, 256, false},
    {"decoder.up_blocks.3.resnets.*.conv2", 128, 128, 3, 1, 256, 256, false},
    {"decoder.conv_out", 128, 3, 3, 1, 256, 256, false},
    {"encoder.down_blocks.0.downsamplers.0.conv", 128, 128, 3, 2, 256, 256, true},
};

Graph conv_graph(const ConvShape& s) {
  GraphBuilder b("bench.conv");
  const int x = b.input("x");
  const int pad = s.k / 2;
  const int y = s.asymmetric_pad ? b.conv2d("conv", x, s.cin, s.cout, s.k, s.stride, 0, 1, 0, 1, true)
                                 : b.conv2d("conv", x, s.cin, s.cout, s.k, s.stride, pad, pad, pad, pad, true);
  b.output("y", y);
  return b.finish();
}

void conv_bench(benchmark::State& state, bool torch) {
  const ConvShape& s = kShapes[state.range(0)];
  const Graph g = conv_graph(s);
  Weights w{{"conv.weight", random_f32({s.cout, s.cin, s.k, s.k}, "w")}, {"conv.bias", random_f32({s.cout}, "b")}};
  const NamedTensors in = {{"x", random_f32({1, s.cin, s.h, s.w}, "x")}};
  for (auto _ : state) {
    auto out = torch ? torch_path::run_graph(g, w, in, DType::kF32) : ref::run_graph(g, w, in, DType::kF32);
    if (!out.ok()) state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  const int64_t ho = s.h / s.stride, wo = s.w / s.stride;
  const double flops = 2.0 * s.cin * s.cout * s.k * s.k * ho * wo;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(s.where);
}

void BM_ConvReference(benchmark::State& state) { conv_bench(state, false); }
void BM_ConvTorch(benchmark::State& state) { conv_bench(state, true); }
BENCHMARK(BM_ConvReference)->DenseRange(0, std::size(kShapes) - 1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ConvTorch)->DenseRange(0, std::size(kShapes) - 1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The compiled path's emulated kernels per fused group: the group of the sd-kl plan (256x256,
// w=f16,a=f16) that holds each conv above, run alone (Session::run_group) on seeded inputs.
// The group adds its fused epilogue (bias, residual add, activation) to the conv's work.
void BM_GroupEmulated(benchmark::State& state) {
  const ConvShape& s = kShapes[state.range(0)];
  const Model& m = sd_kl();
  const bool encoder = std::string(s.where).rfind("encoder", 0) == 0;
  const Graph g = encoder ? build_encoder_graph(m.config) : build_decoder_graph(m.config);
  const Shape in = encoder ? Shape{1, 3, 256, 256} : Shape{1, 4, 32, 32};
  compiled::SessionOptions o;
  o.policy.base = compiled::parse_layer_policy("w=f16,a=f16,acc=f32").value();
  compiled::Session session(o);
  auto plan = session.plan_for(g, m.weights, in);
  auto shapes = compiled::infer_shapes(g, in);
  if (!plan.ok() || !shapes.ok()) return state.SkipWithError("planning failed");
  int index = -1;
  for (std::size_t i = 0; i < (*plan)->groups.size() && index < 0; ++i)
    for (int op : (*plan)->groups[i].ops)
      if (g.ops[std::size_t(op)].kind == OpKind::kConv2d && compiled::glob_match(s.where, g.ops[std::size_t(op)].name)) index = int(i);
  if (index < 0) return state.SkipWithError("no group holds this conv");
  const compiled::Group& group = (*plan)->groups[std::size_t(index)];
  std::map<int, Tensor> values;
  for (int v : group.inputs) values[v] = random_f32((*shapes)[std::size_t(v)], "group-input-" + std::to_string(v));
  auto warm = session.run_group(**plan, index, in, values);
  if (!warm.ok()) return state.SkipWithError(warm.error().message().c_str());
  for (auto _ : state) {
    auto out = session.run_group(**plan, index, in, values);
    benchmark::DoNotOptimize(out);
  }
  const int64_t ho = s.h / s.stride, wo = s.w / s.stride;
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * s.cin * s.cout * s.k * s.k * ho * wo, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(s.where) + " (" + std::to_string(group.ops.size()) + " ops)");
}
BENCHMARK(BM_GroupEmulated)->DenseRange(0, std::size(kShapes) - 1)->Unit(benchmark::kMillisecond)->UseRealTime();

void decode_bench(benchmark::State& state, bool torch) {
  const Model& m = sd_kl();
  const Tensor latent = random_f32({1, 4, 32, 32}, "latent");
  const GraphRunner run = [torch](const Graph& g, const Weights& w, const NamedTensors& in) {
    return torch ? torch_path::run_graph(g, w, in, DType::kF32) : ref::run_graph(g, w, in, DType::kF32);
  };
  for (auto _ : state) {
    auto out = run_pipeline(m, Pipeline::kDecode, latent, run);
    if (!out.ok()) state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["FLOP/s"] = benchmark::Counter(decoder_flops(256), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DecodeSdKl256Reference(benchmark::State& state) { decode_bench(state, false); }
void BM_DecodeSdKl256Torch(benchmark::State& state) { decode_bench(state, true); }
BENCHMARK(BM_DecodeSdKl256Reference)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_DecodeSdKl256Torch)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The compiled path's CPU emulation on the same decode; planning (and weight preparation) runs
// once before timing and is reported as compile_s.
const char* const kPolicies[] = {"w=f32,a=f32,acc=f32", "w=f16,a=f16,acc=f32", "w=bf16,a=bf16,acc=f32", "w=f8e4m3,a=bf16,acc=f32"};

void BM_DecodeSdKl256Compiled(benchmark::State& state) {
  const Model& m = sd_kl();
  const Tensor latent = random_f32({1, 4, 32, 32}, "latent");
  compiled::SessionOptions o;
  o.policy.base = compiled::parse_layer_policy(kPolicies[state.range(0)]).value();
  compiled::Session session(o);
  auto warm = compiled::run_compiled_pipeline(session, m, Pipeline::kDecode, latent);
  if (!warm.ok()) state.SkipWithError(warm.error().message().c_str());
  for (auto _ : state) {
    auto out = compiled::run_compiled_pipeline(session, m, Pipeline::kDecode, latent);
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel(kPolicies[state.range(0)]);
  state.counters["compile_s"] = session.stats().compile_seconds;
  state.counters["arena_MiB"] = double(session.plans()[0]->stats.arena_bytes) / (1 << 20);
  state.counters["FLOP/s"] = benchmark::Counter(decoder_flops(256), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeSdKl256Compiled)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The machine's practical fp32 ceiling: a large square SGEMM with Eigen on all threads.
void BM_SgemmCeiling(benchmark::State& state) {
  const int n = 2048;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SgemmCeiling)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tp

int main(int argc, char** argv) {
  const int threads = omp_get_max_threads();
  tp::torch_path::set_num_threads(threads);
  benchmark::AddCustomContext("threads (reference and torch)", std::to_string(threads));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
