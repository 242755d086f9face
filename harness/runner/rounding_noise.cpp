#include "harness/runner/rounding_noise.h"

#include "compiled/prepared_weights.h"
#include "harness/core/compare.h"
#include "harness/core/format.h"
#include "harness/core/memory.h"
#include "harness/core/rng.h"
#include "reference/executor.h"

namespace tp {
namespace {

// t *= 1 + u r elementwise, r uniform in [-1, 1] from `rng` (t in f32 or f64).
void perturb(Tensor& t, double u, Rng& rng) {
  if (!(u > 0)) return;
  if (t.dtype() == DType::kF32)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = float(t.data<float>()[i] * (1 + u * rng.uniform(-1, 1)));
  else if (t.dtype() == DType::kF64)
    for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] *= 1 + u * rng.uniform(-1, 1);
}

// A model's weights with their storage's rounding noise, and whose they are.
struct NoisyCopy {
  const Weights* weights = nullptr;
  uint64_t identity = 0;  // the unperturbed weights' (the plans' key)
};

// The noisy copy of a model's weights, made once per weights object a run reads.
class NoisyWeights {
 public:
  NoisyWeights(const RoundingNoise& noise, DType compute, uint64_t seed)
      : noise_(noise), compute_(compute), seed_(seed) {}
  // The copy of `weights`, or an error where it would not fit in half the available memory
  // (a full-size model's failing output then keeps the quadrature rule's verdict).
  Expected<NoisyCopy> of(const Weights& weights) {
    if (auto it = copies_.find(&weights); it != copies_.end())
      return NoisyCopy{&it->second.second, it->second.first};
    double bytes = 0;
    for (const auto& [key, t] : weights) bytes += double(t.numel()) * double(dtype_size(compute_));
    const int64_t available = available_memory_bytes();
    if (available > 0 && bytes > 0.5 * double(available))
      return Error("a noisy copy of the weights needs " + format_bytes(int64_t(bytes)) +
                   " of the " + format_bytes(available) + " available");
    auto& [identity, copy] = copies_[&weights];
    const auto known = noise_.identities.find(&weights);
    identity =
        known != noise_.identities.end() ? known->second : compiled::weights_identity(weights);
    const auto params = noise_.params.find(identity);
    for (const auto& [key, t] : weights) {
      Tensor w = t.to(compute_);
      if (params != noise_.params.end())
        if (auto u = params->second.find(key); u != params->second.end()) {
          Rng rng(seed_, "param:" + key);
          perturb(w, u->second, rng);
        }
      copy.emplace(key, std::move(w));
    }
    return NoisyCopy{&copy, identity};
  }

 private:
  const RoundingNoise& noise_;
  DType compute_;
  uint64_t seed_;
  std::map<const Weights*, std::pair<uint64_t, Weights>> copies_;
};

}  // namespace

RoundingNoise rounding_noise(const compiled::Session& session) {
  RoundingNoise noise;
  noise.identities = session.identities();
  for (const compiled::Plan* plan : session.plans()) {
    std::map<int, double>& values = noise.values[{plan->weights_identity, plan->graph->name}];
    std::map<std::string, double>& params = noise.params[plan->weights_identity];
    auto stored = [&](int v) { values[v] = unit_roundoff(plan->buffers.at(v).dtype); };
    for (const auto& [name, id] : plan->graph->inputs)
      if (plan->buffers.count(id)) stored(id);
    for (const compiled::Group& g : plan->groups) {
      for (int v : g.outputs) stored(v);
      for (int o : g.ops) {
        const Op& op = plan->graph->ops[std::size_t(o)];
        if (op.weight.empty()) continue;
        const LayerPolicy layer = plan->policy.for_op(*plan->graph, op, g.policy);
        params[op.weight] = unit_roundoff(compiled::param_storage(layer, is_matrix_op(op.kind)));
        if (!op.bias.empty())
          params[op.bias] = unit_roundoff(compiled::param_storage(layer, false));
      }
    }
  }
  return noise;
}

namespace {

// `graph` on the reference with its values perturbed from `rng`, reading the noisy weights.
Expected<NamedTensors> run_noisy(const Graph& graph, const NoisyCopy& weights,
                                 const NamedTensors& in, const RoundingNoise& noise, DType compute,
                                 Rng& rng) {
  const auto u = noise.values.find({weights.identity, graph.name});
  if (u == noise.values.end()) return ref::run_graph(graph, *weights.weights, in, compute);
  NamedTensors inputs;
  for (const auto& [name, t] : in) {
    inputs.emplace_back(name, t.to(compute));
    for (const auto& [input, id] : graph.inputs)
      if (auto v = u->second.find(id); input == name && v != u->second.end())
        perturb(inputs.back().second, v->second, rng);
  }
  return ref::run_graph(graph, *weights.weights, inputs, compute, {},
                        [&](const Op& op, Tensor& value) {
                          if (auto v = u->second.find(op.output); v != u->second.end())
                            perturb(value, v->second, rng);
                        });
}

}  // namespace

Expected<NamedTensors> noisy_graph(const Graph& graph, const Weights& weights,
                                   const NamedTensors& inputs, const RoundingNoise& noise,
                                   DType compute, uint64_t seed) {
  NoisyWeights noisy(noise, compute, seed);
  TP_ASSIGN_OR_RETURN(const NoisyCopy w, noisy.of(weights));
  Rng rng(seed, "values:" + graph.name);
  return run_noisy(graph, w, inputs, noise, compute, rng);
}

Expected<NamedTensors> noisy_reference(const PreparedCase& q, const RoundingNoise& noise,
                                       uint64_t seed) {
  NoisyWeights weights(noise, q.reference, seed);
  int calls = 0;
  FunctionExecutor noisy(
      [&](const Graph& g, const Weights& w, const NamedTensors& in) -> Expected<NamedTensors> {
        Rng rng(seed, "values:" + g.name + "#" + std::to_string(calls++));
        TP_ASSIGN_OR_RETURN(const NoisyCopy noisy_weights, weights.of(w));
        return run_noisy(g, noisy_weights, in, noise, q.reference, rng);
      });
  return run_model(*q.model, q.pipeline, q.inputs(), noisy, q.options());
}

Expected<Tolerance> rounding_tolerance(const Tensor& noisy, const Tensor& want, int draws) {
  TP_ASSIGN_OR_RETURN(Metrics m, compare_tensors(noisy, want, DType::kF64));
  return rounding_noise_tolerance(m.rel_l2, draws);
}

uint64_t draw_seed(uint64_t seed, int draw) {
  return draw == 0 ? seed : seed ^ hash_name("rounding draw " + std::to_string(draw));
}

}  // namespace tp
