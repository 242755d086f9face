#include "harness/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tp {

Status write_file_atomically(const std::string& path,
                             const std::function<Status(std::ostream&)>& write) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  struct RemoveOnExit {
    const std::string& file;
    bool keep = false;
    ~RemoveOnExit() {
      if (!keep) std::remove(file.c_str());
    }
  } guard{tmp};
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return Error("cannot write " + path + ": " + std::strerror(errno) +
                   "; check that the folder exists and is writable");
    }
    TP_RETURN_IF_ERROR(write(out));
    out.flush();
    if (!out) return Error("writing " + path + " failed (disk full?): " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Error("cannot move the finished file into place at " + path + ": " +
                 std::strerror(errno));
  }
  guard.keep = true;
  return Status();
}

}  // namespace tp
