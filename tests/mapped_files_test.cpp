// Tensors mapped from a safetensors file (harness/core/mapped_files.h): a large tensor is the
// file's pages and a small one a copy; the file truncated under a live tensor ends the process
// with one sentence naming it (exit code 2), not a SIGBUS crash; a file rewritten in place is
// named by changed_files().
#include "harness/core/mapped_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/core/safetensors.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// The file /proc/self/maps says `p` is mapped from, or "" for anonymous memory.
std::string mapped_file_of(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms, offset, device, path;
    uint64_t inode = 0;
    in >> range >> perms >> offset >> device >> inode >> path;
    const std::size_t dash = range.find('-');
    const uintptr_t begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (at >= begin && at < end) return inode == 0 ? "" : path;
  }
  return "";
}

class MappedFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("tp_mapped_" + std::to_string(::getpid()) + "_" + test);
    fs::create_directories(dir_);
    path_ = fs::canonical(dir_).string() + "/model.safetensors";
    Tensor big = Tensor::uninitialized(DType::kF32, {2, 300000});  // 2.4 MB: mapped
    for (int64_t i = 0; i < big.numel(); ++i) big.data<float>()[i] = float(i % 1001);
    ASSERT_TRUE(write_safetensors(path_, {{"big", big}, {"small", Tensor(DType::kF32, {8})}}).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  bool reported_changed() const {
    const std::vector<std::string> changed = mapped_files::changed_files();
    return std::find(changed.begin(), changed.end(), path_) != changed.end();
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(MappedFilesTest, LargeTensorsAreTheFilesPagesSmallOnesCopies) {
  auto file = SafetensorsFile::open(path_);
  ASSERT_TRUE(file.ok()) << file.error().message();
  const Tensor big = std::move(file->read("big")).value();
  const Tensor small = std::move(file->read("small")).value();
  EXPECT_EQ(mapped_file_of(big.raw()), path_);
  EXPECT_EQ(mapped_file_of(small.raw()), "");
  EXPECT_EQ(big.data<float>()[1234], 233.0f);
  EXPECT_FALSE(reported_changed());
}

TEST_F(MappedFilesTest, FileRewrittenInPlaceIsReported) {
  auto file = SafetensorsFile::open(path_);
  ASSERT_TRUE(file.ok()) << file.error().message();
  const Tensor big = std::move(file->read("big")).value();
  EXPECT_FALSE(reported_changed());
  {  // rewrite the last bytes in place, as a writer that does not rename would
    const int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const float value = -1.0f;
    ASSERT_EQ(::pwrite(fd, &value, sizeof value, off_t(fs::file_size(path_) - 36)),
              ssize_t(sizeof value));
    // The clock that stamps files can be coarser than one write: a stamp of its own.
    const timespec stamps[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
    ASSERT_EQ(::futimens(fd, stamps), 0);
    ::close(fd);
  }
  EXPECT_TRUE(reported_changed());
}

TEST_F(MappedFilesTest, FileReplacedByRenameIsNotAChange) {
  auto file = SafetensorsFile::open(path_);
  ASSERT_TRUE(file.ok()) << file.error().message();
  const Tensor big = std::move(file->read("big")).value();
  ASSERT_TRUE(write_safetensors(path_, {{"other", Tensor(DType::kF32, {4})}}).ok());  // renames
  EXPECT_FALSE(reported_changed());
  EXPECT_EQ(big.data<float>()[1234], 233.0f);
}

TEST_F(MappedFilesTest, FileTruncatedUnderALiveTensorEndsWithOneSentence) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto read_after_truncation = [&] {
    auto file = SafetensorsFile::open(path_);
    if (!file.ok()) return;
    const Tensor big = std::move(file->read("big")).value();
    if (::truncate(path_.c_str(), 0) != 0) return;
    volatile float value = big.data<float>()[big.numel() - 1];
    (void)value;
  };
  EXPECT_EXIT(read_after_truncation(), ::testing::ExitedWithCode(2),
              "model.safetensors was truncated or rewritten in place while twinpath used tensors "
              "mapped from it; rerun once nothing writes to that file");
}

}  // namespace
}  // namespace tp
