// Runs the twinpath binary (or any shell command) for end-to-end tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tp::testing {

struct CommandResult {
  int code;
  std::string output;  // stdout and stderr
};

inline CommandResult shell(const std::string& cmd) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  CommandResult r{-1, ""};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CommandResult twinpath(const std::string& args) {
  return shell(std::string(TWINPATH_BINARY) + " " + args);
}

}  // namespace tp::testing
