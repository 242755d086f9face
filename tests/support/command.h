// Runs the twinpath binary (or any shell command) for end-to-end tests.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
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

// twinpath run as the shell's own process (exec), with its peak resident memory (ru_maxrss of
// that process alone, from wait4).
struct MeasuredResult {
  int code = -1;
  std::string output;
  int64_t peak_bytes = 0;
};
inline MeasuredResult twinpath_measured(const std::string& args) {
  static int calls = 0;
  const std::string out =
      "/tmp/tp_measured_" + std::to_string(::getpid()) + "_" + std::to_string(calls++) + ".txt";
  const std::string cmd =
      "exec " + std::string(TWINPATH_BINARY) + " " + args + " >" + out + " 2>&1";
  MeasuredResult r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid) return r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.peak_bytes = int64_t(usage.ru_maxrss) * 1024;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  r.output = text.str();
  std::remove(out.c_str());
  return r;
}

}  // namespace tp::testing
