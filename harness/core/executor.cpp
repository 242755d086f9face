#include "harness/core/executor.h"

namespace tp {

std::string TilingDecision::text() const {
  std::string s =
      std::string(decode ? "decode" : "encode") + " input " + shape_string(input) + ": ";
  const std::string unit = decode ? " latent" : " px";
  if (framewise)
    s += std::to_string(frame_tiles) + " frame tiles (over " + std::to_string(frame_threshold) +
         (decode ? " latent frames), " : " frames), ");
  if (!engaged)
    return s + "not tiled (within the " + std::to_string(threshold) + unit + " tile min)";
  return s + "tiled, " + std::to_string(rows) + "x" + std::to_string(cols) + " tiles of " +
         std::to_string(tile) + unit + " every " + std::to_string(stride);
}

Expected<NamedTensors> GraphExecutor::run_chained(const Graph& first, const Graph& second,
                                                  const Weights& weights,
                                                  const NamedTensors& inputs,
                                                  const std::string& handoff) {
  TP_ASSIGN_OR_RETURN(NamedTensors a, run(first, weights, inputs));
  const Tensor* mid = find_tensor(a, handoff);
  TP_CHECK(mid != nullptr, first.name + " has no output " + handoff);
  TP_ASSIGN_OR_RETURN(NamedTensors out, run(second, weights, {{second.inputs[0].first, *mid}}));
  out.insert(out.end(), a.begin(), a.end());
  return out;
}

}  // namespace tp
