#include "harness/models/config_space.h"

#include "harness/core/numbers.h"

namespace tp {

std::vector<int> ConfigDraw::integers(std::size_t n, int lo, int hi) {
  std::vector<int> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(integer(lo, hi));
  return out;
}

bool is_random_config_name(const std::string& name) {
  return name.rfind(kRandomConfigPrefix, 0) == 0;
}

Expected<RandomConfigName> parse_random_config_name(const std::string& name) {
  const std::string rest = name.substr(std::string(kRandomConfigPrefix).size());
  const std::size_t colon = rest.rfind(':');
  RandomConfigName r;
  if (colon != std::string::npos && colon > 0) {
    r.family = rest.substr(0, colon);
    if (auto seed = parse_number<uint64_t>(std::string_view(rest).substr(colon + 1))) {
      r.seed = *seed;
      return r;
    }
  }
  return Error("'" + excerpt(name) +
               "' is not a drawn config's name; write random:FAMILY:SEED, e.g. "
               "random:autoencoder_kl:7 (`twinpath model space` lists the families)");
}

}  // namespace tp
