// A shard of a run, "K/N": the K-th of N (0 <= K < N), as `run --shard` takes it and reports
// store it. One parser for the flag and for `report merge`, which reads it back.
#pragma once

#include <optional>
#include <string>

#include "harness/core/numbers.h"

namespace tp {

struct ShardSpec {
  int index = 0, total = 1;
};

// Digits, a slash, digits, with index < total and total >= 1; nothing otherwise.
inline std::optional<ShardSpec> parse_shard_spec(const std::string& text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  auto number = [](const std::string& s, int& out) {
    if (s.size() > 9) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    out = parse_number<int>(s).value_or(0);
    return true;
  };
  ShardSpec s;
  if (!number(text.substr(0, slash), s.index) || !number(text.substr(slash + 1), s.total))
    return std::nullopt;
  if (s.total < 1 || s.index >= s.total) return std::nullopt;
  return s;
}

}  // namespace tp
