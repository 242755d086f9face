// Reading diffusers config.json fields: a present field of the wrong type is an error naming
// the key and the file; an absent or null one keeps the caller's default.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/core/status.h"

namespace tp {

// Bounds of what twinpath builds, far past any diffusers model (SDXL: 4 levels of 2 layers, 10
// transformer layers): a config past them is damaged, and its graph would take minutes to build.
constexpr std::size_t kMaxLevels = 16;
constexpr int kMaxLayersPerBlock = 64;

namespace json_config_detail {

template <class T>
struct IsVector : std::false_type {};
template <class U>
struct IsVector<std::vector<U>> : std::true_type {};

// Whole numbers must be whole and fit their field: nlohmann's own conversion would cast 2.5e88 or
// 4294967297 to an int (undefined, or a silently wrong width).
template <class T>
bool convert(const nlohmann::json& v, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return false;
    out = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      const uint64_t x = v.get<uint64_t>();
      if (x > uint64_t(std::numeric_limits<T>::max())) return false;
      out = T(x);
    } else if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (x < int64_t(std::numeric_limits<T>::min()) ||
          (x > 0 && uint64_t(x) > uint64_t(std::numeric_limits<T>::max())))
        return false;
      out = T(x);
    } else {
      return false;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return false;
    out = v.get<T>();
  } else if constexpr (IsVector<T>::value) {
    if (!v.is_array()) return false;
    T items(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!convert(v[i], items[i])) return false;
    out = std::move(items);
  } else {
    out = v.get<T>();
  }
  return true;
}

}  // namespace json_config_detail

template <class T>
Status read_field(const nlohmann::json& j, const char* key, T& out, const std::string& source) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status();
  bool ok = false;
  try {
    ok = json_config_detail::convert(*it, out);
  } catch (const nlohmann::json::exception&) {
  }
  if (!ok)
    return Error(source + ": field '" + key +
                 "' has the wrong type or is out of range: " + it->dump());
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
