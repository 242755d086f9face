// Numbers read from text, for every number a user, a file or a line gives: the whole text is
// the number (std::from_chars: no locale, no exception, no leading '+' or spaces), or the
// caller gets an error that names the field and quotes a short excerpt of what it got.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "harness/core/status.h"

namespace tp {

// At most `max` characters of untrusted text for an error sentence, marked when cut.
inline std::string excerpt(std::string_view text, std::size_t max = 40) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "...";
}

// The number `text` holds, or nothing when it holds anything else or one out of T's range.
// `out_of_range`, when given, says whether the text was a number beyond T's range.
template <class T>
std::optional<T> parse_number(std::string_view text, bool* out_of_range = nullptr) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (out_of_range) *out_of_range = ec == std::errc::result_out_of_range;
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The same with the sentence: "FIELD: 'TEXT' is not a number" (or "... out of range").
template <class T>
Expected<T> parse_number(std::string_view text, std::string_view field) {
  bool out_of_range = false;
  if (auto v = parse_number<T>(text, &out_of_range)) return *v;
  const char* what = out_of_range ? "is out of range for" : "is not";
  const char* kind = std::is_integral_v<T> ? "a whole number" : "a number";
  return Error(std::string(field) + ": '" + excerpt(text) + "' " + what + " " + kind);
}

}  // namespace tp
