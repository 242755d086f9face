// Small text helpers shared by case lines, verdicts, provenance, reports and the CLI.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/numbers.h"

namespace tp {

// A value as people read it in a sentence: 6 significant digits ("65504", "1.23e+05", "nan").
inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// One or two numbers through a printf format of doubles ("%.2e > %.2e").
inline std::string printf_numbers(const char* format, double a, double b = 0) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, a, b);
  return buf;
}

// A number as a case line writes it back: 9 significant digits, so it parses to the same double.
inline std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A whole number of 1 to 9 decimal digits (no sign, no spaces), or false.
inline bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  out = parse_number<int64_t>(s).value_or(0);
  return true;
}

// A number that is the whole of `s` (from_chars' syntax: no sign '+', no spaces; one out of
// double's range is no number), or false; never throws.
inline bool parse_double(std::string_view s, double& out) {
  const std::optional<double> v = parse_number<double>(s);
  if (v) out = *v;
  return v.has_value();
}

// The non-empty pieces of `text` between `sep`s: "a,,b" -> {"a", "b"}.
inline std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

inline std::string join_list(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (const std::string& p : parts) (out.empty() ? out : out += sep) += p;
  return out;
}

// Names as a sentence lists them: "a, b, c", or with `last` before the final one ("a, b or c").
inline std::string comma_list(const std::vector<std::string>& names,
                              const std::string& last = ", ") {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? last : ", ") + names[i];
  return out;
}

inline std::string join_numbers(const std::vector<int64_t>& values, char sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i)
    (i ? out += sep : out) += std::to_string(values[i]);
  return out;
}

// `noun` after its indefinite article, by its first letter: "an AutoencoderKL", "a UNet",
// "an image", "a latent".
inline std::string with_article(const std::string& noun) {
  const char c = noun.empty() ? 'x' : char(std::tolower(static_cast<unsigned char>(noun[0])));
  return (std::string("aeio").find(c) != std::string::npos ? "an " : "a ") + noun;
}

// One command-line argument as a POSIX shell reads it back: as it is when it holds only
// characters no shell treats specially, else in single quotes (a quote inside as '\'').
inline std::string shell_quote(std::string_view arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_@%+=:,./-") == std::string_view::npos;
  if (plain) return std::string(arg);
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The words of a command line as a POSIX shell splits them (spaces; single quotes; a backslash
// outside them escapes the next character): shell_quote's inverse.
inline std::vector<std::string> shell_split(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, started = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '\'')
        quoted = false;
      else
        word += c;
    } else if (c == '\'') {
      quoted = started = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      started = true;
    } else if (c == ' ') {
      if (started) words.push_back(word);
      word.clear();
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  if (started) words.push_back(word);
  return words;
}

// A size in memory as people read it: "512 B", "3.25 MiB", "1.50 GiB".
inline std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b < 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

// An element index: "[0,3,5,7]".
inline std::string format_index(const std::vector<int64_t>& index) {
  return "[" + join_numbers(index, ',') + "]";
}

}  // namespace tp
