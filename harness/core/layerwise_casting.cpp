#include "harness/core/layerwise_casting.h"

#include <map>
#include <mutex>
#include <regex>

#include "harness/core/names.h"

namespace tp {
namespace {

// The module path and each of its ancestors ("a", "a.b", "a.b.c"), outermost first: diffusers
// tests every dotted name on its way down and skips a matching module's whole subtree.
std::vector<std::string> ancestors(const std::string& module) {
  std::vector<std::string> out;
  for (std::size_t dot = module.find('.'); dot != std::string::npos;
       dot = module.find('.', dot + 1))
    out.push_back(module.substr(0, dot));
  out.push_back(module);
  return out;
}

// Each pattern compiled once (a plan asks for every layer of the model).
const std::regex& compiled(const std::string& pattern) {
  static std::mutex mutex;
  static std::map<std::string, std::regex> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(pattern);
  if (it == cache.end()) it = cache.emplace(pattern, std::regex(pattern)).first;
  return it->second;
}

}  // namespace

const std::vector<std::string>& default_layerwise_skip_patterns() {
  static const std::vector<std::string> patterns{"pos_embed", "patch_embed", "norm", "^proj_in$",
                                                 "^proj_out$"};
  return patterns;
}

LayerwiseSkips LayerwiseSkips::of(const Graph& g,
                                  const std::optional<std::vector<std::string>>& globs) {
  LayerwiseSkips s;
  if (globs) {
    s.globs = *globs;
    s.custom = true;
    return s;
  }
  s.patterns = default_layerwise_skip_patterns();
  for (const auto* list : {&g.keep_in_fp32_modules, &g.skip_layerwise_casting_patterns})
    s.patterns.insert(s.patterns.end(), list->begin(), list->end());
  return s;
}

std::optional<std::string> LayerwiseSkips::skipping(const std::string& module) const {
  for (const std::string& name : ancestors(module)) {
    for (const std::string& p : patterns)
      if (std::regex_search(name, compiled(p))) return p;
    for (const std::string& glob : globs)
      if (glob_match(glob, name)) return glob;
  }
  return std::nullopt;
}

std::optional<std::string> kept_in_fp32(const Graph& g, const std::string& key) {
  if (g.keep_in_fp32_modules.empty()) return std::nullopt;
  std::size_t start = 0;
  while (start <= key.size()) {
    const std::size_t end = std::min(key.find('.', start), key.size());
    const std::string component = key.substr(start, end - start);
    for (const std::string& m : g.keep_in_fp32_modules)
      if (m == component) return m;
    start = end + 1;
  }
  return std::nullopt;
}

Expected<QkvFusion> parse_qkv_fusion(std::string_view text) {
  if (text == "before-cast") return QkvFusion::kBeforeCast;
  if (text == "after-cast") return QkvFusion::kAfterCast;
  return Error("fuse-qkv=" + std::string(text) +
               " is unknown; say when fuse_qkv_projections() ran: fuse-qkv=before-cast (before "
               "enable_layerwise_casting) or fuse-qkv=after-cast");
}

const char* qkv_fusion_name(QkvFusion f) {
  switch (f) {
    case QkvFusion::kBeforeCast:
      return "before-cast";
    case QkvFusion::kAfterCast:
      return "after-cast";
    case QkvFusion::kNone:
      break;
  }
  return "";
}

std::optional<std::string> fused_projection(const Graph& g, const Op& op) {
  if (op.kind != OpKind::kLinearLast || op.inputs.empty()) return std::nullopt;
  const std::size_t dot = op.name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string parent = op.name.substr(0, dot), leaf = op.name.substr(dot + 1);
  if (leaf != "to_q" && leaf != "to_k" && leaf != "to_v") return std::nullopt;
  const Op *q = nullptr, *k = nullptr, *v = nullptr;
  for (const Op& o : g.ops) {
    if (o.kind != OpKind::kLinearLast || o.inputs.empty() ||
        o.name.compare(0, dot + 1, op.name, 0, dot + 1) != 0)
      continue;
    const std::string_view other = std::string_view(o.name).substr(dot + 1);
    if (other == "to_q") q = &o;
    if (other == "to_k") k = &o;
    if (other == "to_v") v = &o;
  }
  if (!q || !k || !v) return std::nullopt;
  if (q->inputs[0] == k->inputs[0]) return parent + ".to_qkv";
  if (leaf == "to_q") return std::nullopt;
  return parent + ".to_kv";
}

}  // namespace tp
