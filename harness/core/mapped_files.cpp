#include "harness/core/mapped_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tp::mapped_files {
namespace {

constexpr int kFiles = 64;
constexpr int kRanges = 8192;  // sdxl-base maps about 800 tensors

struct File {
  int fd = -1;  // a duplicate, open for the process's life: fstat sees the file written in place
  std::string path;
  struct stat first {};
};

// Written under the mutex before `file_count` publishes them; read by the signal handler.
std::array<File, kFiles> files;
std::atomic<int> file_count{0};
std::mutex files_mutex;

struct Range {
  std::atomic<uintptr_t> begin{0};  // 0: a free slot
  std::atomic<uintptr_t> end{0};
  std::atomic<int> file{-1};
};
std::array<Range, kRanges> ranges;

struct sigaction previous_bus {};

void say(const char* text) { (void)!::write(2, text, std::strlen(text)); }

// Only async-signal-safe calls: atomics, write, sigaction, _exit.
extern "C" void on_bus_error(int signal, siginfo_t* info, void*) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  const int known = file_count.load(std::memory_order_acquire);
  for (Range& r : ranges) {
    const uintptr_t begin = r.begin.load(std::memory_order_acquire);
    if (begin == 0 || at < begin || at >= r.end.load(std::memory_order_acquire)) continue;
    const int f = r.file.load(std::memory_order_acquire);
    if (f < 0 || f >= known) break;
    static std::atomic<bool> reported{false};
    if (reported.exchange(true))  // another thread's fault says it; the process ends with it
      for (;;) ::pause();
    say("twinpath: error: ");
    say(files[std::size_t(f)].path.c_str());
    say(" was truncated or rewritten in place while twinpath used tensors mapped from it; rerun "
        "once nothing writes to that file (a tool that rewrites a checkpoint should write a new "
        "file and rename it over the old one)\n");
    std::_Exit(2);
  }
  // Not ours: the previous disposition handles the fault when the instruction runs again.
  sigaction(signal, &previous_bus, nullptr);
}

void install_handler() {
  struct sigaction action {};
  action.sa_sigaction = on_bus_error;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous_bus);
}

bool same_contents_stamp(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

int watch(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return -1;
  std::lock_guard<std::mutex> lock(files_mutex);
  const int n = file_count.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    if (files[std::size_t(i)].first.st_dev == st.st_dev &&
        files[std::size_t(i)].first.st_ino == st.st_ino)
      return i;
  if (n == kFiles) return -1;
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return -1;
  files[std::size_t(n)] = File{copy, path, st};
  if (n == 0) install_handler();
  file_count.store(n + 1, std::memory_order_release);
  return n;
}

bool add(int file, const void* begin, std::size_t length) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  for (Range& r : ranges) {
    uintptr_t free = 0;
    if (!r.begin.compare_exchange_strong(free, b, std::memory_order_acq_rel)) continue;
    r.file.store(file, std::memory_order_release);
    r.end.store(b + length, std::memory_order_release);
    return true;
  }
  return false;
}

void remove(const void* begin) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  for (Range& r : ranges)
    if (r.begin.load(std::memory_order_acquire) == b) {
      r.end.store(0, std::memory_order_release);
      r.begin.store(0, std::memory_order_release);
      return;
    }
}

std::vector<std::string> changed_files() {
  std::lock_guard<std::mutex> lock(files_mutex);
  std::vector<std::string> changed;
  const int n = file_count.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i) {
    const File& f = files[std::size_t(i)];
    struct stat now {};
    if (::fstat(f.fd, &now) != 0 || !same_contents_stamp(f.first, now)) changed.push_back(f.path);
  }
  return changed;
}

}  // namespace tp::mapped_files
