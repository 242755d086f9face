// The output error the compiled path's roundings alone make, estimated by Monte Carlo
// arithmetic (Parker 1997; as Verificarlo does): the reference pipeline run again with every
// value a compiled group stores multiplied by (1 + u r), r uniform in [-1, 1] and u the unit
// roundoff of the dtype the plan stores it in, and every parameter by its storage's, against
// the same pipeline unperturbed. It counts what the output rule's quadrature of the groups' u
// does not: a decoder's gain from one group's error to its output, and cancellation between
// groups (docs/tolerances.md, "Monte Carlo rounding estimate"). The runner computes it only
// for an output past the quadrature rule, and the output's bound is then the larger of the two.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "harness/runner/runs.h"
#include "harness/runner/tolerance.h"

namespace tp {

// The unit roundoff each value and parameter is stored in by a session's plans, per model (its
// weights' identity, compiled/prepared_weights.h): a shared session's base and refiner UNets
// name their graphs and parameters alike and may store them in different dtypes.
struct RoundingNoise {
  // (weights identity, graph name) -> value id -> u
  std::map<std::pair<uint64_t, std::string>, std::map<int, double>> values;
  std::map<uint64_t, std::map<std::string, double>> params;  // weights identity -> key -> u
  // The session's weights identities by weights object (each hashed once, when planned).
  std::map<const Weights*, uint64_t> identities;
};
RoundingNoise rounding_noise(const compiled::Session& session);

// `q`'s pipeline on the reference with `noise` applied (values and parameters perturbed from
// the stream of `seed`): its outputs.
Expected<NamedTensors> noisy_reference(const PreparedCase& q, const RoundingNoise& noise,
                                       uint64_t seed);

// One call of `graph` on the reference with `noise` applied: its outputs.
Expected<NamedTensors> noisy_graph(const Graph& graph, const Weights& weights,
                                   const NamedTensors& inputs, const RoundingNoise& noise,
                                   DType compute, uint64_t seed);

// The output bound (rounding_noise_tolerance) from a noisy run's output `noisy` against the
// unperturbed `want`, as the largest of `draws` draws.
Expected<Tolerance> rounding_tolerance(const Tensor& noisy, const Tensor& want, int draws = 1);

// The seed of draw `draw` (0, 1, ...) of an estimate whose first draw is seeded `seed`.
uint64_t draw_seed(uint64_t seed, int draw);

}  // namespace tp
