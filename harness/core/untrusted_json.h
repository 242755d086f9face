// JSON a user or a file gives (config.json, safetensors headers, checkpoint indexes, dump and
// repro metadata, plan files): its size and nesting are bounded before nlohmann parses it, so
// a value nested 100,000 levels deep is one sentence and not a stack overflow (in the parser,
// the destructor or a print); errors show values through json_excerpt, never a whole dump.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "harness/core/status.h"

namespace tp {

// Far past any diffusers config (block lists nest 2 deep) or twinpath's own files (3).
constexpr int kMaxJsonDepth = 64;
constexpr std::size_t kMaxJsonBytes = std::size_t{256} << 20;

struct JsonReadOptions {
  bool comments = false;  // // and /* */ comments allowed (diffusers' configs never have them)
  nlohmann::json::parser_callback_t callback = nullptr;
};

// The value `text` holds. `what` names it in the error ("config.json", "the header").
Expected<nlohmann::json> parse_untrusted_json(std::string_view text, const std::string& what,
                                              const JsonReadOptions& options = {});

// A short rendering of `v` for an error sentence: a number or a literal as written, a string
// quoted, cut at 40 characters and with bytes that are not printable UTF-8 escaped, an array or
// object as its size ("an array of 3").
std::string json_excerpt(const nlohmann::json& v);

// `j` as text (indented by `indent`, or on one line when -1) whatever its strings hold: bytes
// that are not UTF-8 (a string a damaged report or file carried in) become U+FFFD instead of
// throwing from the printer. Every JSON twinpath prints or writes goes through this.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tp
