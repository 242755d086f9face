// CUDA benchmarks (run on a GPU machine by tools/gpu-run.sh; every benchmark skips without a
// device): the sd-kl decode at 512x512 and 1024x1024 on the compiled path's CUDA kernels per
// dtype policy, beside LibTorch's own CUDA ops (cuDNN, cuBLAS, SDPA) running the same graph in
// f16 and bf16, in the same binary, and the fused groups of that plan one by one; the compiled
// path with each kernel set (per-op and fused, compiled/backend.h). Each reports
// FLOP/s against vae-facts.md §8's FLOP count and its relative L2 error against LibTorch's CUDA
// fp32 (TF32 off) on the same input.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>

#include "compiled/describe_session.h"
#include "compiled/device.h"
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
  compiled::SessionOptions o;
  o.policy.base = compiled::parse_layer_policy(policy).value();
  auto backend = compiled::make_cuda_backend(kernels, graphs);
  if (!backend.ok()) return state.SkipWithError(backend.error().message().c_str());
  const compiled::Backend* device = backend.value().get();
  compiled::Session session(o, std::move(backend).value());
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

void BM_DecodeSdKlTorchCuda(benchmark::State& state) {
  if (!torch_path::cuda_available()) return state.SkipWithError("LibTorch sees no CUDA device");
  const int image = int(state.range(0));
  const DType dt = state.range(1) == 0 ? DType::kF16 : DType::kBF16;
  auto runner = torch_path::Runner::create(sd_kl().weights, dt, true);
  if (!runner.ok()) return state.SkipWithError(runner.error().message().c_str());
  const Graph decoder = build_decoder_graph(vae_config(sd_kl()));
  const NamedTensors in = {{"latents", latent_for(image)}};
  auto out = runner.value()->run(decoder, in);  // uploads weights, warms cuDNN
  if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  for (auto _ : state) {
    out = runner.value()->run(decoder, in);
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
  }
  state.SetLabel(std::string("LibTorch CUDA ") + dtype_name(dt));
  report(state, image, out.value()[0].second);
}
BENCHMARK(BM_DecodeSdKlTorchCuda)
    ->ArgsProduct({{512, 1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(10);

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
