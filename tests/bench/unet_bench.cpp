// One UNet call (`unet.step`) of SDXL's base UNet (seeded weights, diffusers' config) at a given
// latent size, on the fp32 reference, on LibTorch's CPU ops doing the same graph, and on the
// compiled path's CPU emulation per dtype policy; beside a large Eigen SGEMM as the machine's
// measured FLOP/s ceiling. The FLOP count (convs, linears and both attention products) comes
// from the graph at the call's shapes, so the floor is FLOPs over the measured ceiling.
//
// The weights alone take 10.3 GB in fp32, so run one path (and one policy) per process:
// `unet_bench --benchmark_filter='Reference|Sgemm'`, `Torch`, `Emulated/0` and so on.
// TP_BENCH_UNET picks the model (default sdxl-base), TP_BENCH_LATENT the latent side (default
// 128: 1024x1024 pixels).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "compiled/plan.h"
#include "compiled/session.h"
#include "harness/models/family.h"
#include "harness/models/model.h"
#include "reference/executor.h"
#include "reference/torch/torch_path.h"
#include "tests/bench/bench_support.h"

namespace tp {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

Model& unet() { return bench::seeded_model(env_or("TP_BENCH_UNET", "sdxl-base")); }

const NamedTensors& call_inputs() {
  static const NamedTensors inputs =
      bench::unet_step_inputs(unet(), std::atoll(env_or("TP_BENCH_LATENT", "128").c_str()));
  return inputs;
}

void report(benchmark::State& state, const std::string& policy = "") {
  const Model& m = unet();
  const double flops = bench::graph_flops(m.family().graphs(*m.config).at(0), call_inputs());
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP"] = flops / 1e12;
  const Shape& s = call_inputs()[0].second.shape();
  state.SetLabel(env_or("TP_BENCH_UNET", "sdxl-base") + " latent " + std::to_string(s[2]) + "x" +
                 std::to_string(s[3]) + (policy.empty() ? "" : " " + policy));
}

void reference_or_torch(benchmark::State& state, bool torch) {
  const Model& m = unet();
  const GraphRunner run = [torch](const Graph& g, const Weights& w, const NamedTensors& in) {
    return torch ? torch_path::run_graph(g, w, in, DType::kF32)
                 : ref::run_graph(g, w, in, DType::kF32);
  };
  const Graph g = m.family().graphs(*m.config).at(0);
  for (auto _ : state) {
    auto out = run(g, m.weights, call_inputs());
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  report(state);
}

void BM_UnetCallReference(benchmark::State& state) { reference_or_torch(state, false); }
void BM_UnetCallTorch(benchmark::State& state) { reference_or_torch(state, true); }
BENCHMARK(BM_UnetCallReference)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_UnetCallTorch)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// The emulation: planning (and weight preparation) runs before timing, reported as compile_s.
const char* const kPolicies[] = {"w=f16,a=f16,acc=f32", "w=bf16,a=bf16,acc=f32",
                                 "w=f8e4m3,a=bf16,acc=f32"};

void BM_UnetCallEmulated(benchmark::State& state) {
  Model& m = unet();
  const Graph g = m.family().graphs(*m.config).at(0);
  compiled::SessionOptions o;
  o.policy.base = compiled::parse_layer_policy(kPolicies[state.range(0)]).value();
  compiled::Session session(o);
  std::vector<Shape> others;
  for (std::size_t i = 1; i < call_inputs().size(); ++i)
    others.push_back(call_inputs()[i].second.shape());
  auto plan = session.plan_for(g, m.weights, call_inputs()[0].second.shape(), others);
  if (!plan.ok()) return state.SkipWithError(plan.error().message().c_str());
  // The plan holds its own prepared weights; the model's fp32 copy (10.3 GB for SDXL) is released
  // so one process fits a 24 GB machine. Run one policy per process (--benchmark_filter=.../0).
  for (auto& [key, t] : m.weights) t = Tensor();
  for (auto _ : state) {
    auto out = session.run(g, m.weights, call_inputs());
    if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  report(state, kPolicies[state.range(0)]);
  state.counters["compile_s"] = session.stats().compile_seconds;
  state.counters["arena_MiB"] = double((*plan)->stats.arena_bytes) / (1 << 20);
  state.counters["groups"] = double((*plan)->groups.size());
}
BENCHMARK(BM_UnetCallEmulated)
    ->DenseRange(0, 2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

void BM_SgemmCeiling(benchmark::State& state) { bench::sgemm_ceiling(state); }
BENCHMARK(BM_SgemmCeiling)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace tp

int main(int argc, char** argv) { return tp::bench::run_benchmarks(argc, argv); }
