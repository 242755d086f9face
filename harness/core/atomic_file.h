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

}  // namespace tp
