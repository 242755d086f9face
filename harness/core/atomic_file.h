// Writes a file so that readers never see half of it: the bytes go to a temporary file beside
// the target, which is renamed over it only after every byte was written and flushed.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "harness/core/status.h"

namespace tp {

// `write` streams the content; if it returns an error or throws, the target is untouched.
Status write_file_atomically(const std::string& path,
                             const std::function<Status(std::ostream&)>& write);

// The same for writers that take a file name (HDF5): `write` fills `tmp`, which then replaces
// `path` in one rename.
Status write_path_atomically(const std::string& path,
                             const std::function<Status(const std::string& tmp)>& write);

// Whether a file could be written at `path` now (its folder exists and is writable): checked
// before a long run, so that a wrong --report costs a sentence rather than the run.
Status check_writable_path(const std::string& path, const std::string& flag);

}  // namespace tp
