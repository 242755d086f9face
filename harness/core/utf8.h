// UTF-8 checks for text read from files: where the first invalid sequence is, and a copy that
// any printer (text, JSON, HTML) can take, each invalid byte replaced by U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tp {

// The offset of the first invalid UTF-8 sequence in s[0, n) (overlong forms, surrogates and
// code points past U+10FFFF included), or -1.
int64_t first_invalid_utf8(const uint8_t* s, uint64_t n);

// `text` with every byte that does not start a valid sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

}  // namespace tp
