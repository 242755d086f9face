// Deterministic random numbers: the same seed gives the same values on every machine
// (no std::random_device, no std:: distributions, whose output is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace tp {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a of a string, to derive independent streams from names (case ids, tensor keys).
inline uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  Rng(uint64_t seed, const std::string& stream) : state_(seed ^ hash_name(stream)) {}
  uint64_t next() { return splitmix64(state_); }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // N(0, sigma^2) by Box-Muller (u1 in (0, 1]), one uniform pair per value.
  double normal(double sigma = 1) {
    const double u1 = 1 - uniform(), u2 = uniform();
    return sigma * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace tp
