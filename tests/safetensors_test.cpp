// The safetensors reader refuses every file the reference Rust reader refuses, each with its
// own message naming the file (and the tensor where there is one); the writer round-trips.
#include "harness/core/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness/core/tensor_io.h"

namespace tp {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tp_st_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A file from a header text and a data buffer; `declared` overrides the length field.
  std::string write_raw(const std::string& header, const std::string& data, int64_t declared = -1) {
    std::string path = (dir_ / ("f" + std::to_string(count_++) + ".safetensors")).string();
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = declared >= 0 ? uint64_t(declared) : header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << data;
    return path;
  }
  // Opening must fail with a message holding `fragment` and the file's path.
  void expect_refused(const std::string& path, const std::string& fragment) {
    auto f = SafetensorsFile::open(path);
    ASSERT_FALSE(f.ok()) << "accepted a bad file; expected: " << fragment;
    EXPECT_NE(f.error().message().find(fragment), std::string::npos) << f.error().message();
    EXPECT_NE(f.error().message().find(path), std::string::npos) << f.error().message();
  }

  std::filesystem::path dir_;
  int count_ = 0;
};

const std::string kEight(8, 'x');

TEST_F(SafetensorsTest, RefusesEachViolation) {
  const std::string ok_entry = R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  {  // shorter than the length field
    const std::string path = (dir_ / "short.safetensors").string();
    std::ofstream(path) << "abc";
    expect_refused(path, "shorter than the 8-byte header length");
  }
  expect_refused(write_raw("{}", "", 100'000'001), "exceeds the 100,000,000-byte limit");
  expect_refused(write_raw("{}", "", 4096), "runs past the end");
  expect_refused(write_raw("{\"\xff\": 1}", ""), "not valid UTF-8");
  expect_refused(write_raw("{\"a\": ", ""), "not valid JSON");
  expect_refused(write_raw("[1, 2]", ""), "not a JSON object");
  expect_refused(write_raw("{" + ok_entry + ", " + ok_entry + "}", kEight + kEight),
                 "'a' is listed twice");
  expect_refused(write_raw(R"({"__metadata__": {"format": 1}})", ""),
                 "__metadata__ entry 'format'");
  expect_refused(write_raw(R"({"__metadata__": [1]})", ""), "__metadata__ must be a map");
  expect_refused(
      write_raw(R"({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", kEight),
      "tensor 'a': unknown dtype 'F33'");
  expect_refused(
      write_raw(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", kEight),
      "tensor 'a': shape entry must be a non-negative integer");
  expect_refused(write_raw(R"({"a": {"dtype": "F32", "shape": [2]}})", kEight),
                 "tensor 'a': missing field 'data_offsets'");
  expect_refused(write_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           kEight + "1234"),
                 "tensor 'a': data_offsets [4, 12] should start at byte 0");
  expect_refused(write_raw(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           kEight + "1234"),
                 "tensor 'b': data_offsets [4, 12] should start at byte 8");
  expect_refused(
      write_raw(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", kEight),
      "tensor 'a': data_offsets span 8 bytes but F32 [3] needs 12");
  expect_refused(write_raw(R"({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}})", "xx"),
                 "tensor 'a': F4 [3] is not a whole number of bytes");
  expect_refused(
      write_raw(
          R"({"a": {"dtype": "F64", "shape": [281474976710656, 281474976710656], "data_offsets": [0, 8]}})",
          kEight),
      "tensor 'a': shape [281474976710656, 281474976710656] overflows");
  expect_refused(
      write_raw(R"({"a": {"dtype": "F64", "shape": [281474976710657], "data_offsets": [0, 8]}})",
                kEight),
      "tensor 'a': shape entry 281474976710657 is too large");
  expect_refused(write_raw("{" + ok_entry + "}", kEight + "zz"), "the file has trailing bytes");
  expect_refused(write_raw("{" + ok_entry + "}", "1234"), "the file is truncated");
  expect_refused((dir_ / "missing.safetensors").string(), "cannot open");
}

TEST_F(SafetensorsTest, AcceptsWhatTheReferenceAccepts) {
  // Leading and trailing whitespace, extra fields, empty and rank-0 tensors, other dtypes.
  auto f = SafetensorsFile::open(write_raw(
      R"(  {"e": {"dtype": "F16", "shape": [0, 3], "data_offsets": [0, 0]},
            "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4], "extra": true},
            "i": {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]}}    )",
      "abcd" + kEight));
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->entries().size(), 3u);
  auto s = f->read("s");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->numel(), 1);
  auto e = f->read("e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->numel(), 0);
  auto i = f->read("i");  // valid file, but not a dtype twinpath computes with
  ASSERT_FALSE(i.ok());
  EXPECT_NE(i.error().message().find("tensor 'i' has dtype I64"), std::string::npos);
}

TEST_F(SafetensorsTest, WriterRoundTripsEveryDType) {
  NamedTensors tensors;
  int k = 0;
  for (DType dt :
       {DType::kF8E5M2, DType::kF64, DType::kF16, DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    Tensor t = Tensor::uninitialized(dt, {3, 5});
    for (std::size_t b = 0; b < t.nbytes(); ++b) t.raw()[b] = std::byte((b * 37 + 11 * k) & 0x7F);
    tensors.emplace_back(std::string("t") + dtype_name(dt), std::move(t));
    ++k;
  }
  const std::string path = (dir_ / "rt.safetensors").string();
  ASSERT_TRUE(write_safetensors(path, tensors).ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  // Laid out by descending alignment, then name: f64 first, fp8 last.
  EXPECT_EQ(f->entries().front().dtype, "F64");
  EXPECT_EQ(f->entries().back().name, "tf8e5m2");
  for (const auto& [name, t] : tensors) {
    auto back = f->read(name);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->dtype(), t.dtype());
    EXPECT_EQ(back->shape(), t.shape());
    EXPECT_EQ(std::memcmp(back->raw(), t.raw(), t.nbytes()), 0) << name;
  }
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u) << "header not padded to a multiple of 8";
}

// A tensor of 1 MiB or more is read as a private mapping of its bytes (no copy): it must still
// be a value. Two reads do not alias, writing to one changes neither the other nor the file,
// and both outlive the SafetensorsFile they came from.
TEST_F(SafetensorsTest, LargeTensorsReadInPlaceAreIndependentValues) {
  Tensor big = Tensor::uninitialized(DType::kF32, {3, 100003});  // 1.2 MB, not a page multiple
  for (int64_t i = 0; i < big.numel(); ++i) big.data<float>()[i] = float(i % 977) - 400.0f;
  const Tensor small(DType::kF64, {3});  // before `big` in the file: big's bytes start mid-page
  const std::string path = (dir_ / "big.safetensors").string();
  ASSERT_TRUE(write_safetensors(path, {{"big", big}, {"small", small}}).ok());
  Tensor first, second;
  {
    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message();
    first = std::move(f->read("big")).value();
    second = std::move(f->read("big")).value();
  }
  ASSERT_EQ(std::memcmp(first.raw(), big.raw(), big.nbytes()), 0);
  first.data<float>()[0] = 1e9f;
  first.data<float>()[big.numel() - 1] = -1e9f;
  EXPECT_EQ(second.data<float>()[0], big.data<float>()[0]);
  EXPECT_EQ(second.data<float>()[big.numel() - 1], big.data<float>()[big.numel() - 1]);
  const Tensor copy = first;  // a copy owns its bytes and keeps the writes
  first = Tensor();
  EXPECT_EQ(copy.data<float>()[0], 1e9f);
  auto again = SafetensorsFile::open(path);
  ASSERT_TRUE(again.ok());
  auto third = again->read("big");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(std::memcmp(third->raw(), big.raw(), big.nbytes()), 0) << "the file changed";
}

TEST_F(SafetensorsTest, NpyRoundTripAndErrors) {
  Tensor t(DType::kF32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data<float>()[i] = float(i) - 2.5f;
  const std::string path = (dir_ / "x.npy").string();
  ASSERT_TRUE(write_npy(path, t).ok());
  auto back = read_npy(path);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->shape(), t.shape());
  EXPECT_EQ(std::memcmp(back->raw(), t.raw(), t.nbytes()), 0);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  auto cut = read_npy(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("data is shorter than its shape [2, 3]"), std::string::npos)
      << cut.error().message();
  // A scalar (shape ()) with two of its four bytes: the read itself finds the file short.
  {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    header.resize(64 - 10 - 1, ' ');
    header += '\n';
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write("\x93NUMPY\x01\x00", 8);
    const char len[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
    out.write(len, 2);
    out << header << "ab";
  }
  auto scalar = read_npy(path);
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.error().message().find("data is shorter than its shape [] needs"),
            std::string::npos)
      << scalar.error().message();
  ASSERT_TRUE(write_npy(path, t).ok());
  { std::ofstream(path, std::ios::binary | std::ios::app) << 'x'; }
  auto longer = read_npy(path);
  ASSERT_FALSE(longer.ok());
  EXPECT_NE(longer.error().message().find("bytes past the data"), std::string::npos)
      << longer.error().message();
  auto two = write_tensor_file(path, {{"a", t}, {"b", t}});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.error().message().find("holds one tensor"), std::string::npos);
}

TEST_F(SafetensorsTest, FailedWriteLeavesNoFile) {
  const std::string path = (dir_ / "no_such_dir" / "out.safetensors").string();
  EXPECT_FALSE(write_safetensors(path, {{"a", Tensor(DType::kF32, {1})}}).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace tp
