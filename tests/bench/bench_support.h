// Shared by the benchmark binaries: seeded inputs, the sd-kl model (seeded random weights) and
// the decoder's FLOP count, the floor every figure is measured against.
#pragma once

#include <benchmark/benchmark.h>
#include <ftw.h>
#include <omp.h>
#include <unistd.h>

#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiled/describe_session.h"
#include "compiled/plan.h"
#include "harness/core/rng.h"
#include "harness/core/sgemm.h"
#include "harness/models/family.h"
#include "harness/models/model.h"
#include "harness/models/vae/vae_graphs.h"
#include "reference/torch/torch_path.h"

namespace tp::bench {

inline Tensor random_f32(const Shape& shape, const std::string& stream) {
  Tensor t(DType::kF32, shape);
  Rng rng(1, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform(-1, 1));
  return t;
}

// A built-in config with seeded random weights (seed 0), made once per process (mutable: a
// benchmark may release weights it no longer reads).
inline Model& seeded_model(const std::string& name) {
  static std::map<std::string, Model> models;
  auto it = models.find(name);
  if (it != models.end()) return it->second;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/tp_bench_" + name + "_" +
                          std::to_string(::getpid());
  if (Status s = init_model(name, 0, dir); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.error().message().c_str());
    std::abort();
  }
  Model m = load_model(dir).value();
  // POSIX, not std::filesystem::remove_all: PyPI's libtorch.so exports std::filesystem symbols
  // of its own, and the benchmarks' calls bound to them crashed (H100 run, 2026-11-25).
  nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 8,
      FTW_DEPTH | FTW_PHYS);
  return models[name] = std::move(m);
}

inline const Model& sd_kl() { return seeded_model("sd-kl"); }

// One `unet.step` call's seeded inputs at a latent side (the family's own: sample, timestep,
// 77-token text states and for SDXL the pooled embedding and time ids), bound as the graph takes
// them.
inline NamedTensors unet_step_inputs(const Model& m, int64_t latent) {
  InputRequest r;
  r.pipeline = "unet.step";
  r.height = r.width = 8 * latent;
  r.seed = 1;
  auto in = m.family().generate_inputs(m, r, {});
  auto bound = in.ok() ? m.family().bind_inputs(m, r.pipeline, *in) : in;
  if (!bound.ok()) {
    std::fprintf(stderr, "%s\n", bound.error().message().c_str());
    std::abort();
  }
  return *bound;
}

// 2 x multiply-adds of a graph's convs, linears and attention products at the call's shapes.
inline double graph_flops(const Graph& g, const NamedTensors& inputs) {
  std::vector<Shape> others;
  for (std::size_t i = 1; i < inputs.size(); ++i) others.push_back(inputs[i].second.shape());
  auto shapes = compiled::infer_shapes(g, inputs[0].second.shape(), others);
  if (!shapes.ok()) return 0;
  std::map<std::string, Shape> params;
  for (const ParamSpec& p : g.params) params[p.key] = p.shape;
  double macs = 0;
  for (const Op& op : g.ops) {
    const Shape& out = (*shapes)[std::size_t(op.output)];
    if (op.kind == OpKind::kConv || op.kind == OpKind::kLinearLast) {
      const Shape& w = params.at(op.weight);
      macs += double(shape_numel(out)) * double(shape_numel(w) / w[0]);
    } else if (op.kind == OpKind::kMultiHeadAttention) {
      const Shape &q = (*shapes)[std::size_t(op.inputs[0])],
                  &k = (*shapes)[std::size_t(op.inputs[1])],
                  &v = (*shapes)[std::size_t(op.inputs[2])];
      macs += double(q[0]) * double(q[1]) * double(k[1]) * double(q[2] + v[2]);
    }
  }
  return 2 * macs;
}

// The machine's practical fp32 ceiling: a large square SGEMM on all threads, with Eigen
// (sgemm_ceiling) and with twinpath's own product (sgemm_ceiling_twinpath); a floor is taken
// from the faster.
inline void sgemm_ceiling_twinpath(benchmark::State& state) {
  const int64_t n = 2048;
  std::vector<float> a(std::size_t(n * n), 0.5f), b(std::size_t(n * n), 0.25f),
      c(std::size_t(n * n));
  for (auto _ : state) {
    sgemm::gemm(n, n, n, {a.data(), n, 1}, sgemm::pack_strided({b.data(), n, 1}), {c.data(), n, 1});
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

inline void sgemm_ceiling(benchmark::State& state) {
  const int n = 2048;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

// SD/SDXL KL decoder at image x image: conv + linear + attention matmul work (vae-facts.md §8).
inline double decoder_flops(int image) {
  const double h = image / 8.0;
  const auto conv = [](double ci, double co, double k, double px) { return ci * co * k * k * px; };
  const auto res = [&](double ci, double co, double px) {
    return conv(ci, co, 3, px) + conv(co, co, 3, px) + (ci != co ? conv(ci, co, 1, px) : 0);
  };
  double px = h * h, macs = conv(4, 4, 1, px) + conv(4, 512, 3, px) + 2 * res(512, 512, px) +
                            4 * 512 * 512 * px + 2 * px * px * 512;
  const int rev[] = {512, 512, 256, 128};
  int prev = 512;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) macs += res(j == 0 ? prev : rev[i], rev[i], px);
    prev = rev[i];
    if (i < 3) {
      px *= 4;
      macs += conv(rev[i], rev[i], 3, px);
    }
  }
  return 2 * (macs + conv(128, 3, 3, px));
}

// The SD-VAE's conv shapes (batch 1, 256x256 image), by the diffusers module they stand for.
struct ConvShape {
  const char* where;  // the diffusers module it stands for, at a 256x256 image
  int cin, cout, k, stride, h, w;
  bool asymmetric_pad;  // Downsample2D: pad (0,1,0,1)
};

inline const ConvShape kShapes[] = {
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

// Token-layout linears at the denoisers' shapes (x [1, tokens, in] -> [1, tokens, out]): SDXL's
// attention projections, GEGLU and ff.net.2 at 1024^2 (64^2 and 32^2 latent tokens) and
// Wan-1.3B's FFN on one 480x832 latent frame (30x52 patches). tools/bench/peer_torch.py times
// the same list.
struct LinearShape {
  const char* where;
  int64_t tokens, in, out;
};

inline const LinearShape kLinearShapes[] = {
    {"sdxl 1024^2 down_blocks.1 attn to_q (4096 tok)", 4096, 640, 640},
    {"sdxl 1024^2 down_blocks.1 ff GEGLU proj", 4096, 640, 5120},
    {"sdxl 1024^2 down_blocks.1 ff.net.2", 4096, 2560, 640},
    {"sdxl 1024^2 down_blocks.2 attn to_q (1024 tok)", 1024, 1280, 1280},
    {"sdxl 1024^2 down_blocks.2 ff GEGLU proj", 1024, 1280, 10240},
    {"sdxl 1024^2 down_blocks.2 ff.net.2", 1024, 5120, 1280},
    {"wan-1.3b 480x832 ffn.0 (1 latent frame)", 1560, 1536, 8960},
    {"wan-1.3b 480x832 ffn.2 (1 latent frame)", 1560, 8960, 1536},
};

// One path's per-group benchmark: the fused group of the sd-kl plan (256x256 image,
// w=f16,a=f16,acc=f32) that holds kShapes[state.range(0)]'s conv, run alone
// (Session::run_group) on seeded inputs on `backend`. The group adds its fused epilogue (bias,
// residual add, activation) to the conv's work; FLOP/s counts the conv's.
inline void conv_group_bench(benchmark::State& state,
                             Expected<std::unique_ptr<compiled::Backend>> backend) {
  if (!backend.ok()) return state.SkipWithError(backend.error().message().c_str());
  const ConvShape& s = kShapes[state.range(0)];
  const Model& m = sd_kl();
  const bool encoder = std::string(s.where).rfind("encoder", 0) == 0;
  const Graph g = encoder ? build_encoder_graph(vae_config(m)) : build_decoder_graph(vae_config(m));
  const Shape in = encoder ? Shape{1, 3, 256, 256} : Shape{1, 4, 32, 32};
  compiled::SessionOptions o;
  o.policy.base = compiled::parse_layer_policy("w=f16,a=f16,acc=f32").value();
  compiled::Session session(o, std::move(backend).value());
  auto plan = session.plan_for(g, m.weights, in);
  auto shapes = compiled::infer_shapes(g, in);
  if (!plan.ok() || !shapes.ok()) return state.SkipWithError("planning failed");
  int index = -1;
  for (std::size_t i = 0; i < (*plan)->groups.size() && index < 0; ++i)
    for (int op : (*plan)->groups[i].ops)
      if (conv2d_window(g.ops[std::size_t(op)]) &&
          compiled::glob_match(s.where, g.ops[std::size_t(op)].name))
        index = int(i);
  if (index < 0) return state.SkipWithError("no group holds this conv");
  const compiled::Group& group = (*plan)->groups[std::size_t(index)];
  std::map<int, Tensor> values;
  for (int v : group.inputs)
    values[v] = random_f32((*shapes)[std::size_t(v)], "group-input-" + std::to_string(v));
  auto warm = session.run_group(**plan, index, in, values);
  if (!warm.ok()) return state.SkipWithError(warm.error().message().c_str());
  for (auto _ : state) {
    auto out = session.run_group(**plan, index, in, values);
    benchmark::DoNotOptimize(out);
  }
  const int64_t ho = s.h / s.stride, wo = s.w / s.stride;
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * s.cin * s.cout * s.k * s.k * ho * wo,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(s.where) + " (" + std::to_string(group.ops.size()) + " ops)");
}

// main() of the CPU benchmarks: the reference's OpenMP threads and LibTorch's the same number.
inline int run_benchmarks(int argc, char** argv) {
  const int threads = omp_get_max_threads();
  torch_path::set_num_threads(threads);
  benchmark::AddCustomContext("threads (reference and torch)", std::to_string(threads));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace tp::bench
