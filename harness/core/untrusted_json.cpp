#include "harness/core/untrusted_json.h"

#include <algorithm>

namespace tp {
namespace {

// How deep `text` nests, stopping at the first level past kMaxJsonDepth; strings (and, when
// allowed, comments) are skipped so that brackets inside them do not count.
int nesting(std::string_view text, bool comments) {
  int depth = 0, deepest = 0;
  for (std::size_t i = 0; i < text.size() && deepest <= kMaxJsonDepth; ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
    } else if (comments && c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      i = std::min(text.find('\n', i), text.size());
    } else if (comments && c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const std::size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// `s` with anything but printable ASCII escaped (\xNN), at most `max` characters of it.
std::string printable(const std::string& s, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  for (; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return i < s.size() ? out + "..." : out;
}

}  // namespace

Expected<nlohmann::json> parse_untrusted_json(std::string_view text, const std::string& what,
                                              const JsonReadOptions& options) {
  if (text.size() > kMaxJsonBytes)
    return Error(what + " is " + std::to_string(text.size() >> 20) +
                 " MiB of JSON, more than the 256 MiB twinpath reads; the file is damaged");
  if (nesting(text, options.comments) > kMaxJsonDepth)
    return Error(what + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                 " levels, which no model or twinpath file does; the file is damaged");
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), options.callback,
                                           /*allow_exceptions=*/false, options.comments);
  if (j.is_discarded()) return Error(what + " is not valid JSON; the file is damaged");
  return j;
}

std::string json_excerpt(const nlohmann::json& v) {
  if (v.is_string()) return "\"" + printable(v.get_ref<const std::string&>(), 40) + "\"";
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  return v.dump();  // a number, true, false or null: short and ASCII
}

}  // namespace tp
