// Reading diffusers config.json fields: a present field of the wrong type is an error naming
// the key and the file; an absent or null one keeps the caller's default.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/core/status.h"

namespace tp {

template <class T>
Status read_field(const nlohmann::json& j, const char* key, T& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  try {
    out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return Error(source + ": field '" + key + "' has the wrong type: " + it->dump());
  }
  return Status();
}

// A per-level field given as one value or as a list of `levels` values (diffusers broadcasts an
// int to every level); absent or null keeps `out`, which the caller sized.
template <class T>
Status read_per_level(const nlohmann::json& j, const char* key, std::vector<T>& out,
                      std::size_t levels, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  if (!it->is_array()) {
    T v{};
    TP_RETURN_IF_ERROR(read_field(j, key, v, source));
    out.assign(levels, v);
    return Status();
  }
  TP_RETURN_IF_ERROR(read_field(j, key, out, source));
  if (out.size() != levels)
    return Error(source + ": '" + key + "' lists " + std::to_string(out.size()) +
                 " entries; it needs one per block (" + std::to_string(levels) + ")");
  return Status();
}

}  // namespace tp
