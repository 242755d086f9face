#include "harness/core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/core/atomic_file.h"
#include "harness/core/mapped_files.h"
#include "harness/core/numbers.h"
#include "harness/core/untrusted_json.h"
#include "harness/core/utf8.h"

namespace tp {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

struct SafetensorsFile::Mapping {
  const uint8_t* bytes = nullptr;
  uint64_t size = 0;
  int fd = -1;       // the file, open for mapping large tensors one by one
  int watched = -1;  // its index in mapped_files' watch list; -1: copy every tensor
  ~Mapping() {
    if (watched >= 0) mapped_files::remove(bytes);
    if (bytes != nullptr) ::munmap(const_cast<uint8_t*>(bytes), size);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

constexpr uint64_t kMaxHeaderSize = 100'000'000;  // the reference reader's MAX_HEADER_SIZE
constexpr uint64_t kLengthBytes = 8;

struct FileDType {
  const char* name;
  int bits;
  int alignment_rank;  // position in the reference enum, which is in increasing alignment
};

// Every dtype string of the reference reader's Dtype enum, with its bit size.
const FileDType kFileDTypes[] = {
    {"BOOL", 8, 0},    {"F4", 4, 1},          {"F6_E2M3", 6, 2},      {"F6_E3M2", 6, 3},
    {"U8", 8, 4},      {"I8", 8, 5},          {"F8_E5M2", 8, 6},      {"F8_E4M3", 8, 7},
    {"F8_E8M0", 8, 8}, {"F8_E4M3FNUZ", 8, 9}, {"F8_E5M2FNUZ", 8, 10}, {"I16", 16, 11},
    {"U16", 16, 12},   {"F16", 16, 13},       {"BF16", 16, 14},       {"I32", 32, 15},
    {"U32", 32, 16},   {"F32", 32, 17},       {"C64", 64, 18},        {"F64", 64, 19},
    {"I64", 64, 20},   {"U64", 64, 21},
};

const FileDType* find_file_dtype(const std::string& s) {
  for (const FileDType& d : kFileDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

Expected<uint64_t> json_u64(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_unsigned())  // nlohmann parses non-negative integers as unsigned
    return Error(what + " must be a non-negative integer, got " + json_excerpt(v));
  return v.get<uint64_t>();
}

Expected<SafetensorsEntry> parse_entry(const std::string& name, const nlohmann::json& info) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object())
    return Error(where + ": entry must be a JSON object, got " + json_excerpt(info));
  SafetensorsEntry e;
  e.name = name;
  auto dt = info.find("dtype");
  if (dt == info.end() || !dt->is_string()) return Error(where + ": missing string field 'dtype'");
  e.dtype = dt->get<std::string>();
  if (find_file_dtype(e.dtype) == nullptr)
    return Error(where + ": unknown dtype '" + e.dtype +
                 "' (safetensors dtypes are BOOL, U8, "
                 "I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, ...)");
  auto shape = info.find("shape");
  if (shape == info.end() || !shape->is_array())
    return Error(where + ": missing array field 'shape'");
  for (const auto& d : *shape) {
    TP_ASSIGN_OR_RETURN(uint64_t v, json_u64(d, where + ": shape entry"));
    if (v > (uint64_t(1) << 48))
      return Error(where + ": shape entry " + std::to_string(v) + " is too large");
    e.shape.push_back(int64_t(v));
  }
  auto offsets = info.find("data_offsets");
  if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2)
    return Error(where + ": missing field 'data_offsets' of two integers [begin, end]");
  TP_ASSIGN_OR_RETURN(e.begin, json_u64((*offsets)[0], where + ": data_offsets begin"));
  TP_ASSIGN_OR_RETURN(e.end, json_u64((*offsets)[1], where + ": data_offsets end"));
  return e;
}

// Byte size of a tensor, with the reference reader's overflow and alignment checks.
Expected<uint64_t> entry_nbytes(const SafetensorsEntry& e) {
  const FileDType* dt = find_file_dtype(e.dtype);
  unsigned __int128 n = 1;
  for (int64_t d : e.shape) {
    n *= uint64_t(d);
    if (n > ~uint64_t(0))
      return Error("tensor '" + e.name + "': shape " + shape_string(e.shape) + " overflows");
  }
  n *= unsigned(dt->bits);
  if (n > ~uint64_t(0))
    return Error("tensor '" + e.name + "': shape " + shape_string(e.shape) + " overflows");
  if (n % 8 != 0)
    return Error("tensor '" + e.name + "': " + e.dtype + " " + shape_string(e.shape) +
                 " is not a whole number of bytes");
  return uint64_t(n / 8);
}

}  // namespace

Expected<SafetensorsFile> parse_mapped_safetensors(
    std::string path, std::shared_ptr<const SafetensorsFile::Mapping> m) {
  const uint8_t* bytes = m->bytes;
  const uint64_t size = m->size;
  uint64_t n = 0;
  std::memcpy(&n, bytes, kLengthBytes);
  if (n > kMaxHeaderSize)
    return Error("header length " + std::to_string(n) +
                 " exceeds the 100,000,000-byte limit; "
                 "the file is corrupt or not a safetensors file");
  if (kLengthBytes + n > size)
    return Error("header length " + std::to_string(n) + " runs past the end of the " +
                 std::to_string(size) + "-byte file; the file is truncated or not safetensors");
  const uint8_t* header = bytes + kLengthBytes;
  if (int64_t bad = first_invalid_utf8(header, n); bad >= 0)
    return Error("header is not valid UTF-8 (byte " + std::to_string(bad) + " of the header)");
  uint64_t first = 0;
  while (first < n && std::isspace(header[first])) ++first;
  if (first == n || header[first] != '{')
    return Error("header is not a JSON object (it must begin with '{')");

  // Duplicate tensor names are forbidden by the format; the JSON parser would silently keep
  // one, so watch the top-level keys while parsing.
  std::set<std::string> seen;
  std::string duplicate;
  auto watch = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  JsonReadOptions options;
  options.callback = watch;
  auto parsed = parse_untrusted_json(
      std::string_view(reinterpret_cast<const char*>(header), std::size_t(n)), "header", options);
  if (!parsed.ok()) return Error(parsed.error().message() + " (or not safetensors)");
  nlohmann::json root = std::move(parsed).value();
  if (!root.is_object())
    return Error("header is not a JSON object; the file is corrupt or not safetensors");
  if (!duplicate.empty()) return Error("tensor '" + duplicate + "' is listed twice in the header");

  SafetensorsFile file;
  file.path_ = std::move(path);
  file.mapping_ = std::move(m);
  file.data_start_ = kLengthBytes + n;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return Error("__metadata__ must be a map of strings to strings");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          return Error("__metadata__ entry '" + excerpt(mk) + "' must be a string, got " +
                       json_excerpt(mv));
        file.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    TP_ASSIGN_OR_RETURN(SafetensorsEntry e, parse_entry(key, value));
    file.entries_.push_back(std::move(e));
  }
  std::sort(file.entries_.begin(), file.entries_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t start = 0;
  for (const SafetensorsEntry& e : file.entries_) {
    if (e.begin != start || e.end < e.begin)
      return Error("tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                   std::to_string(e.end) + "] should start at byte " + std::to_string(start) +
                   "; tensors must tile the data buffer with no gap or overlap");
    TP_ASSIGN_OR_RETURN(uint64_t nbytes, entry_nbytes(e));
    if (e.end - e.begin != nbytes)
      return Error("tensor '" + e.name + "': data_offsets span " + std::to_string(e.end - e.begin) +
                   " bytes but " + e.dtype + " " + shape_string(e.shape) + " needs " +
                   std::to_string(nbytes));
    start = e.end;
  }
  if (file.data_start_ + start != size)
    return Error("the tensors cover " + std::to_string(start) +
                 " bytes of data but the file holds " + std::to_string(size - file.data_start_) +
                 (file.data_start_ + start > size ? "; the file is truncated"
                                                  : "; the file has trailing bytes"));
  return file;
}

namespace {

// Drops the mapped file's pages under [p, p + n) from the process (the mapping is private and
// read-only: a later read faults them in again from the page cache), so that loading a
// checkpoint holds its tensors, not the tensors and every page of the file besides.
void release_pages(const uint8_t* p, std::size_t n) {
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(p) & ~(page - 1), end = uintptr_t(p) + n;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Tensors at least this large are mapped, each on its own, rather than copied.
constexpr std::size_t kMappedBytes = std::size_t(1) << 20;

// Bytes [at, at + n) of the file as a private, writable mapping of their own (copy on write:
// the tensor is a value like any other, and the file never changes), or nullptr where the
// kernel refuses or mapped_files can watch no more ranges. `keeper` unmaps it when the last
// owner goes.
std::byte* map_range(int fd, int watched, uint64_t at, std::size_t n,
                     std::shared_ptr<void>& keeper) {
  const auto page = uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t start = at & ~(page - 1);
  const std::size_t length = std::size_t(at - start) + n;
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd,
                   off_t(start));
  if (p == MAP_FAILED) return nullptr;
  if (!mapped_files::add(watched, p, length)) {
    ::munmap(p, length);
    return nullptr;
  }
  // Reads the file now, as a copy would (the load, not the first use, waits for the disk), and
  // maps its pages in one call instead of a fault per 64 KiB.
  if (::madvise(p, length, MADV_POPULATE_READ) != 0) ::madvise(p, length, MADV_WILLNEED);
  keeper = std::shared_ptr<void>(p, [length](void* q) {
    mapped_files::remove(q);
    ::munmap(q, length);
  });
  return static_cast<std::byte*>(p) + (at - start);
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto fail = [&](const std::string& what) { return Error(path + ": " + what); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size < kLengthBytes) {
    ::close(fd);
    return fail("the file is " + std::to_string(size) +
                " bytes, shorter than the 8-byte header length; it is not a safetensors file");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return fail(std::string("cannot map the file: ") + std::strerror(errno));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->bytes = static_cast<const uint8_t*>(p);
  mapping->size = size;
  mapping->fd = fd;
  if (size >= kMappedBytes) mapping->watched = mapped_files::watch(fd, path);
  // While the load copies small tensors out of it, the whole file is watched too.
  if (mapping->watched >= 0) mapped_files::add(mapping->watched, p, size);
  auto parsed = parse_mapped_safetensors(path, std::move(mapping));
  if (!parsed.ok()) return parsed.error().with_context(path);
  return parsed;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const char* safetensors_dtype(DType dt) {
  switch (dt) {
    case DType::kF64:
      return "F64";
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kF8E5M2:
      return "F8_E5M2";
  }
  return "?";
}

Expected<Tensor> SafetensorsFile::read(const SafetensorsEntry& e) const {
  for (DType dt :
       {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2}) {
    if (e.dtype == safetensors_dtype(dt)) {
      const uint64_t at = data_start_ + e.begin;
      const std::size_t n = std::size_t(shape_numel(e.shape)) * dtype_size(dt);
      std::shared_ptr<void> keeper;
      if (n >= kMappedBytes && mapping_->watched >= 0 && at % dtype_size(dt) == 0)
        if (std::byte* bytes = map_range(mapping_->fd, mapping_->watched, at, n, keeper))
          return Tensor::over(dt, e.shape, bytes, std::move(keeper));
      Tensor t = Tensor::uninitialized(dt, e.shape);
      if (t.nbytes() == 0) return t;
      const uint8_t* from = mapping_->bytes + at;
      std::memcpy(t.raw(), from, t.nbytes());
      release_pages(from, t.nbytes());
      return t;
    }
  }
  return Error(
      path_ + ": tensor '" + e.name + "' has dtype " + e.dtype +
      ", which twinpath does not compute with (use F64, F32, F16, BF16, F8_E4M3 or F8_E5M2)");
}

Expected<Tensor> SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) return Error(path_ + ": no tensor named '" + name + "'");
  return read(*e);
}

Status write_safetensors(const std::string& path, const NamedTensors& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    const std::size_t sa = dtype_size(a->second.dtype()), sb = dtype_size(b->second.dtype());
    return sa != sb ? sa > sb : a->first < b->first;
  });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto* t : order) {
    if (!names.insert(t->first).second)
      return Error("cannot write " + path + ": tensor name '" + t->first + "' is used twice");
    header[t->first] = {{"dtype", safetensors_dtype(t->second.dtype())},
                        {"shape", t->second.shape()},
                        {"data_offsets", {offset, offset + t->second.nbytes()}}};
    offset += t->second.nbytes();
  }
  std::string text = json_text(header);
  text.append((8 - text.size() % 8) % 8, ' ');
  return write_file_atomically(path, [&](std::ostream& out) -> Status {
    const uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto* t : order)
      out.write(reinterpret_cast<const char*>(t->second.raw()),
                std::streamsize(t->second.nbytes()));
    return Status();
  });
}

}  // namespace tp
