#include "harness/core/utf8.h"

namespace tp {
namespace {

// The length of the valid sequence at s[0, n), or 0.
int sequence_length(const uint8_t* s, uint64_t n) {
  const uint8_t c = s[0];
  const int len = c < 0x80           ? 1
                  : (c >> 5) == 0x6  ? 2
                  : (c >> 4) == 0xE  ? 3
                  : (c >> 3) == 0x1E ? 4
                                     : 0;
  if (len == 0 || uint64_t(len) > n) return 0;
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3F);
  }
  const bool overlong =
      (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

int64_t first_invalid_utf8(const uint8_t* s, uint64_t n) {
  for (uint64_t i = 0; i < n;) {
    const int len = sequence_length(s + i, n - i);
    if (len == 0) return int64_t(i);
    i += uint64_t(len);
  }
  return -1;
}

std::string valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  if (first_invalid_utf8(s, text.size()) < 0) return std::string(text);
  std::string out;
  for (uint64_t i = 0; i < text.size();) {
    const int len = sequence_length(s + i, text.size() - i);
    if (len == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(text.data() + i, std::size_t(len));
      i += uint64_t(len);
    }
  }
  return out;
}

}  // namespace tp
