// Reference conv2d on the SD-VAE's conv shapes and a whole sd-kl decode at 256x256, each
// beside LibTorch's CPU ops doing the same work in the same binary, the compiled path's
// emulated kernels on the same decode per dtype policy and per fused group, plus a large Eigen
// SGEMM as the machine's measured FLOP/s ceiling. All use the same number of threads.
#include <benchmark/benchmark.h>

#include "compiled/describe_session.h"
#include "harness/core/compare.h"
#include "harness/models/vae/pipeline.h"
#include "harness/models/vae/vae_graphs.h"
#include "reference/executor.h"
#include "reference/ops/ops.h"
#include "reference/torch/torch_path.h"
#include "tests/bench/bench_support.h"

namespace tp {
namespace {

using bench::ConvShape;
using bench::decoder_flops;
using bench::kShapes;
using bench::random_f32;
using bench::sd_kl;

Graph conv_graph(const ConvShape& s) {
  GraphBuilder b("bench.conv");
  const int x = b.input("x");
  const int pad = s.k / 2;
  const int y = s.asymmetric_pad
                    ? b.conv2d("conv", x, s.cin, s.cout, s.k, s.stride, 0, 1, 0, 1, true)
                    : b.conv2d("conv", x, s.cin, s.cout, s.k, s.stride, pad, pad, pad, pad, true);
  b.output("y", y);
  return b.finish();
}

void conv_bench(benchmark::State& state, bool torch) {
  const ConvShape& s = kShapes[state.range(0)];
  const Graph g = conv_graph(s);
  Weights w{{"conv.weight", random_f32({s.cout, s.cin, s.k, s.k}, "w")},
            {"conv.bias", random_f32({s.cout}, "b")}};
  const NamedTensors in = {{"x", random_f32({1, s.cin, s.h, s.w}, "x")}};
  for (auto _ : state) {
    auto out = torch ? torch_path::run_graph(g, w, in, DType::kF32)
                     : ref::run_graph(g, w, in, DType::kF32);
    if (!out.ok()) state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  const int64_t ho = s.h / s.stride, wo = s.w / s.stride;
  const double flops = 2.0 * s.cin * s.cout * s.k * s.k * ho * wo;
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(s.where);
}

// The reference's conv op alone (no graph executor: no input copy, no output of its own), the
// work F.conv2d does in tools/bench/peer_torch.py.
void BM_ConvReferenceOp(benchmark::State& state) {
  const ConvShape& s = kShapes[state.range(0)];
  const Tensor w = random_f32({s.cout, s.cin, s.k, s.k}, "w"), bias = random_f32({s.cout}, "b");
  const Tensor x = random_f32({1, s.cin, s.h, s.w}, "x");
  Conv2dWindow a;
  a.stride = s.stride;
  const int pad = s.k / 2;
  a.pad_top = a.pad_left = s.asymmetric_pad ? 0 : pad;
  a.pad_bottom = a.pad_right = s.asymmetric_pad ? 1 : pad;
  for (auto _ : state) benchmark::DoNotOptimize(ref::conv2d<float>(x, w, &bias, a));
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * s.cin * s.cout * s.k * s.k * (s.h / s.stride) * (s.w / s.stride),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(s.where);
}
BENCHMARK(BM_ConvReferenceOp)
    ->DenseRange(0, std::size(kShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ConvReference(benchmark::State& state) { conv_bench(state, false); }
void BM_ConvTorch(benchmark::State& state) { conv_bench(state, true); }
BENCHMARK(BM_ConvReference)
    ->DenseRange(0, std::size(kShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ConvTorch)
    ->DenseRange(0, std::size(kShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// HunyuanVideo's causal 3x3x3 convs (replicate pad in space, k-1 frames before) at the shapes of
// its decoder on a 64x64-pixel tile (diffusers' enable_tiling(64, 64, 48, 48): latents of 8x8,
// 5 frames), the reference's conv op beside LibTorch's conv3d (after its F.pad, as diffusers).
struct CausalConvShape {
  const char* where;
  int cin, cout, t, h, w;
};
const CausalConvShape kCausalConvShapes[] = {
    {"decoder.up_blocks.0.resnets.*.conv*", 512, 512, 5, 8, 8},
    {"decoder.up_blocks.1.resnets.*.conv*", 512, 512, 9, 16, 16},
    {"decoder.up_blocks.2.resnets.0.conv1", 512, 256, 17, 32, 32},
    {"decoder.up_blocks.2.resnets.1.conv*", 256, 256, 17, 32, 32},
    {"decoder.up_blocks.3.resnets.0.conv1", 256, 128, 17, 64, 64},
    {"decoder.up_blocks.3.resnets.1.conv*", 128, 128, 17, 64, 64},
};

void causal_conv_bench(benchmark::State& state, bool torch) {
  const CausalConvShape& s = kCausalConvShapes[state.range(0)];
  GraphBuilder b("bench.conv3d");
  b.output("y", b.conv("conv", b.input("x"), s.cin, s.cout, {3, 3, 3}, {1, 1, 1}, {1, 1, 1},
                       {2, 1, 1}, {0, 1, 1}, PadMode::kReplicate));
  const Graph g = b.finish();
  const Weights w{{"conv.weight", random_f32({s.cout, s.cin, 3, 3, 3}, "w")},
                  {"conv.bias", random_f32({s.cout}, "b")}};
  const NamedTensors in = {{"x", random_f32({1, s.cin, s.t, s.h, s.w}, "x")}};
  const OpAttrs& attrs = g.ops.back().attrs;
  for (auto _ : state) {
    if (!torch) {
      benchmark::DoNotOptimize(
          ref::conv<float>(in[0].second, w.at("conv.weight"), &w.at("conv.bias"), attrs));
      continue;
    }
    auto out = torch_path::run_graph(g, w, in, DType::kF32);
    if (!out.ok()) state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * s.cin * s.cout * 27 * s.t * s.h * s.w,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(s.where);
}
void BM_CausalConv3dReferenceOp(benchmark::State& state) { causal_conv_bench(state, false); }
void BM_CausalConv3dTorch(benchmark::State& state) { causal_conv_bench(state, true); }
BENCHMARK(BM_CausalConv3dReferenceOp)
    ->DenseRange(0, std::size(kCausalConvShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_CausalConv3dTorch)
    ->DenseRange(0, std::size(kCausalConvShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void linear_bench(benchmark::State& state, bool torch) {
  const bench::LinearShape& s = bench::kLinearShapes[state.range(0)];
  GraphBuilder b("bench.linear");
  b.output("y", b.linear_last("proj", b.input("x"), int(s.in), int(s.out)));
  const Graph g = b.finish();
  Weights w{{"proj.weight", random_f32({s.out, s.in}, "w")},
            {"proj.bias", random_f32({s.out}, "b")}};
  const NamedTensors in = {{"x", random_f32({1, s.tokens, s.in}, "x")}};
  for (auto _ : state) {
    if (!torch) {  // the op alone, as nn.Linear in tools/bench/peer_torch.py
      benchmark::DoNotOptimize(
          ref::linear_last<float>(in[0].second, w.at("proj.weight"), &w.at("proj.bias")));
      continue;
    }
    auto out = torch_path::run_graph(g, w, in, DType::kF32);
    if (!out.ok()) state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * s.tokens * s.in * s.out,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(s.where);
}

// One checkpoint's comparison (every metric of the report) at the size of the sd-kl decoder's
// largest activation at 512^2 (128 x 512 x 512), as `run` and `tradeoff` do for every checkpoint.
// A 33M-element checkpoint against its fp32 reference; the captured value in fp32 (0) or, as
// the runner reads a stored f16 group output back, in f16 (1).
// Arg 2: one of ci's checkpoints instead (a drawn video VAE's 24 channels of 5 frames of 32x48,
// 184,320 elements, in f16): ci compares about 240,000 such checkpoints and smaller.
void BM_CompareTensors(benchmark::State& state) {
  const Shape shape = state.range(0) == 2 ? Shape{1, 24, 5, 32, 48} : Shape{1, 128, 512, 512};
  const Tensor want = bench::random_f32(shape, "compare-want");
  Tensor got = want.to(DType::kF16);
  if (state.range(0) == 0) got = got.to(DType::kF32);
  for (auto _ : state) {
    auto m = compare_tensors(got, want, DType::kF16);
    benchmark::DoNotOptimize(m);
  }
  state.SetLabel(state.range(0) == 0   ? "got f32"
                 : state.range(0) == 1 ? "got f16"
                                       : "ci-sized, f16");
  state.counters["elements/s"] =
      benchmark::Counter(double(want.numel()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CompareTensors)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Tensor::to between fp32 and f16/bf16 on the same 33M elements: uploads, read-backs and the
// comparisons' widening all go through it. Args: target dtype (0 f16, 1 bf16), direction (0
// narrowing f32 -> dtype, 1 widening dtype -> f64).
void BM_ConvertElements(benchmark::State& state) {
  const DType narrow = state.range(0) == 0 ? DType::kF16 : DType::kBF16;
  const Tensor wide = bench::random_f32({1, 128, 512, 512}, "convert");
  const Tensor small = wide.to(narrow);
  for (auto _ : state) {
    Tensor out = state.range(1) == 0 ? wide.to(narrow) : small.to(DType::kF64);
    benchmark::DoNotOptimize(out.raw());
  }
  state.SetLabel(std::string(state.range(1) == 0 ? "f32 -> " : "") + dtype_name(narrow) +
                 (state.range(1) == 0 ? "" : " -> f64"));
  state.counters["elements/s"] =
      benchmark::Counter(double(wide.numel()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ConvertElements)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LinearReference(benchmark::State& state) { linear_bench(state, false); }
void BM_LinearTorch(benchmark::State& state) { linear_bench(state, true); }
BENCHMARK(BM_LinearReference)
    ->DenseRange(0, std::size(bench::kLinearShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_LinearTorch)
    ->DenseRange(0, std::size(bench::kLinearShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The compiled path's emulated kernels per fused group (bench::conv_group_bench).
void BM_GroupEmulated(benchmark::State& state) {
  bench::conv_group_bench(state, compiled::make_emulated_backend());
}
BENCHMARK(BM_GroupEmulated)
    ->DenseRange(0, std::size(kShapes) - 1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void decode_bench(benchmark::State& state, bool torch) {
  const Model& m = sd_kl();
  const Tensor latent = random_f32({1, 4, 32, 32}, "latent");
  const GraphRunner run = [torch](const Graph& g, const Weights& w, const NamedTensors& in) {
    return torch ? torch_path::run_graph(g, w, in, DType::kF32)
                 : ref::run_graph(g, w, in, DType::kF32);
  };
  for (auto _ : state) {
    auto out = run_pipeline(m, Pipeline::kDecode, latent, run);
    if (!out.ok()) state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(decoder_flops(256), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DecodeSdKl256Reference(benchmark::State& state) { decode_bench(state, false); }
void BM_DecodeSdKl256Torch(benchmark::State& state) { decode_bench(state, true); }
BENCHMARK(BM_DecodeSdKl256Reference)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_DecodeSdKl256Torch)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The compiled path's CPU emulation on the same decode; planning (and weight preparation) runs
// once before timing and is reported as compile_s.
const char* const kPolicies[] = {"w=f32,a=f32,acc=f32", "w=f16,a=f16,acc=f32",
                                 "w=bf16,a=bf16,acc=f32", "w=f8e4m3,a=bf16,acc=f32"};

void BM_DecodeSdKl256Compiled(benchmark::State& state) {
  const Model& m = sd_kl();
  const Tensor latent = random_f32({1, 4, 32, 32}, "latent");
  compiled::SessionOptions o;
  o.policy.base = compiled::parse_layer_policy(kPolicies[state.range(0)]).value();
  compiled::Session session(o);
  auto warm = run_pipeline(m, Pipeline::kDecode, latent, session);
  if (!warm.ok()) state.SkipWithError(warm.error().message().c_str());
  for (auto _ : state) {
    auto out = run_pipeline(m, Pipeline::kDecode, latent, session);
    benchmark::DoNotOptimize(out);
  }
  state.SetLabel(kPolicies[state.range(0)]);
  state.counters["compile_s"] = session.stats().compile_seconds;
  state.counters["arena_MiB"] = double(session.plans()[0]->stats.arena_bytes) / (1 << 20);
  state.counters["FLOP/s"] =
      benchmark::Counter(decoder_flops(256), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeSdKl256Compiled)
    ->DenseRange(0, 3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_SgemmCeiling(benchmark::State& state) { bench::sgemm_ceiling(state); }
BENCHMARK(BM_SgemmCeiling)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_SgemmCeilingTwinpath(benchmark::State& state) { bench::sgemm_ceiling_twinpath(state); }
BENCHMARK(BM_SgemmCeilingTwinpath)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tp

int main(int argc, char** argv) { return tp::bench::run_benchmarks(argc, argv); }
