#include "compiled/describe_session.h"

#include <cstdio>

namespace tp::compiled {

std::string describe_session(const Session& s) {
  std::string out;
  char line[512];
  for (const Plan* p : s.plans()) {
    std::snprintf(line, sizeof line,
                  "  plan   %s %s: %d ops in %d groups, arena %.2f MiB (%.2f MiB without reuse), "
                  "weights %.2f MiB, compiled in %.3f s\n",
                  p->graph->name.c_str(), shape_string(p->capacity_shape).c_str(), p->stats.ops,
                  p->stats.groups, double(p->stats.arena_bytes) / (1 << 20),
                  double(p->stats.unshared_bytes) / (1 << 20),
                  double(p->stats.weight_bytes) / (1 << 20), p->stats.compile_seconds);
    out += line;
  }
  for (const TilingDecision& t : s.tiling()) out += "  tiling " + t.text() + "\n";
  const CacheStats& c = s.stats();
  std::snprintf(line, sizeof line,
                "  cache  %lld compilations, %lld loaded, %lld hits, %.3f s compiling; weights "
                "held once: %.2f MiB in %zu tensors; arenas: %.2f MiB peak, %lld evicted\n",
                static_cast<long long>(c.compilations), static_cast<long long>(c.loaded),
                static_cast<long long>(c.hits), c.compile_seconds,
                double(s.weight_store().bytes_held()) / (1 << 20), s.weight_store().count(),
                double(c.peak_arena_bytes) / (1 << 20), static_cast<long long>(c.evictions));
  return out + line;
}

}  // namespace tp::compiled
