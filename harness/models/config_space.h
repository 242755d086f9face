// A family's space of valid configs (issue 43): what `model=random:FAMILY:SEED` draws. A family
// declares it beside its code (its folder's config_space.cpp): the config.json keys a draw
// varies, each with its range in words, and the draw, which builds a config.json object valid
// by construction (the rules diffusers' constructors enforce, and twinpath's own limits) and
// small enough that a case at the suites' resolutions runs in well under a second. The same
// (family, seed) draws the same config on every machine (harness/core/rng.h).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/rng.h"
#include "harness/core/status.h"

namespace tp {

// One key a draw varies, and its range in words ("1 to 4 entries, each groups x 1..4").
struct ConfigKey {
  std::string key, range;
};

// The choices one draw makes, from the (family, seed) stream.
class ConfigDraw {
 public:
  ConfigDraw(const std::string& family, uint64_t seed) : rng_(seed, "config:" + family) {}
  // Uniform in [lo, hi].
  int integer(int lo, int hi) { return lo + int(rng_.next() % uint64_t(hi - lo + 1)); }
  bool chance(double p) { return rng_.uniform() < p; }
  template <class T>
  T pick(std::initializer_list<T> choices) {
    return *(choices.begin() + integer(0, int(choices.size()) - 1));
  }
  // `n` integers in [lo, hi].
  std::vector<int> integers(std::size_t n, int lo, int hi);

 private:
  Rng rng_;
};

struct ConfigSpace {
  std::string family;  // the registry's name for the family, as its folder: "autoencoder_kl"
  std::vector<ConfigKey> keys;
  // A config.json object, _class_name included.
  std::function<nlohmann::json(ConfigDraw&)> draw;
};

// A drawn config's name, "random:FAMILY:SEED".
struct RandomConfigName {
  std::string family;
  uint64_t seed = 0;
};
constexpr const char* kRandomConfigPrefix = "random:";
bool is_random_config_name(const std::string& name);
// The parts of a "random:..." name, or what is wrong with it and what to write.
Expected<RandomConfigName> parse_random_config_name(const std::string& name);

}  // namespace tp
