// gzip in memory (zlib), for text kept with the sources that outgrew a plain file: the gate's
// baseline. The output is deterministic (no name, no time in the header), so the same text
// always gives the same bytes and a refresh that changes nothing changes no file.
#pragma once

#include <cstddef>
#include <string>

#include "harness/core/status.h"

namespace tp {

std::string gzip_text(const std::string& text);
// The text inside `bytes`; an error names what is damaged, or that the text is larger than
// `limit` bytes (a file that inflates without end is refused, not followed).
Expected<std::string> gunzip_text(const std::string& bytes, std::size_t limit);
// Whether `bytes` starts with gzip's magic.
bool looks_gzipped(const std::string& bytes);

}  // namespace tp
