#include "harness/core/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tp {

Status write_path_atomically(const std::string& path,
                             const std::function<Status(const std::string& tmp)>& write) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  struct RemoveOnExit {
    const std::string& file;
    bool keep = false;
    ~RemoveOnExit() {
      if (!keep) std::remove(file.c_str());
    }
  } guard{tmp};
  TP_RETURN_IF_ERROR(write(tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Error("cannot move the finished file into place at " + path + ": " +
                 std::strerror(errno));
  }
  guard.keep = true;
  return Status();
}

Status write_file_atomically(const std::string& path,
                             const std::function<Status(std::ostream&)>& write) {
  return write_path_atomically(path, [&](const std::string& tmp) -> Status {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return Error("cannot write " + path + ": " + std::strerror(errno) +
                   "; check that the folder exists and is writable");
    }
    TP_RETURN_IF_ERROR(write(out));
    out.flush();
    if (!out) return Error("writing " + path + " failed (disk full?): " + std::strerror(errno));
    return Status();
  });
}

}  // namespace tp
