#include "harness/core/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
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

Status check_writable_path(const std::string& path, const std::string& flag) {
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec))
    return Error(flag + " " + path + ": the folder " + folder.string() +
                 " does not exist; create it first or name another path");
  if (::access(folder.c_str(), W_OK) != 0)
    return Error(flag + " " + path + ": the folder " + folder.string() +
                 " is not writable; name a path in a folder you can write");
  if (std::filesystem::is_directory(path, ec))
    return Error(flag + " " + path + " is a folder; name a file in it");
  return Status();
}

}  // namespace tp
