#include "harness/core/tensor_io.h"

#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include "harness/core/atomic_file.h"
#include "harness/core/numbers.h"
#include "harness/core/png_io.h"

namespace tp {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const char* npy_descr(DType dt) {
  switch (dt) {
    case DType::kF64:
      return "<f8";
    case DType::kF32:
      return "<f4";
    case DType::kF16:
      return "<f2";
    default:
      return nullptr;
  }
}

// The text of key `key`'s value in an .npy header (a Python dict literal), after the key's
// colon and any spaces; nothing when the key is missing. A scan, not a regex: a header may hold
// tens of thousands of spaces of padding.
std::optional<std::string_view> npy_value(std::string_view header, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "':";
  const std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t v = at + quoted.size();
  while (v < header.size() && (header[v] == ' ' || header[v] == '\t')) ++v;
  return header.substr(v);
}

// The value of `key` between `open` and the next `close` ('descr': '<f4' -> <f4), or nothing.
std::optional<std::string> npy_enclosed(std::string_view header, std::string_view key, char open,
                                        char close) {
  const std::optional<std::string_view> v = npy_value(header, key);
  if (!v || v->empty() || v->front() != open) return std::nullopt;
  const std::size_t end = v->find(close, 1);
  if (end == std::string_view::npos) return std::nullopt;
  return std::string(v->substr(1, end - 1));
}

}  // namespace

Expected<Tensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(path + ": cannot open: " + std::strerror(errno));
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return Error(path + ": not a .npy file (bad magic bytes)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t n16 = 0;
    in.read(reinterpret_cast<char*>(&n16), 2);
    header_len = n16;
  } else if (magic[6] == 2 || magic[6] == 3) {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  } else {
    return Error(path + ": unsupported .npy version " + std::to_string(int(magic[6])));
  }
  const std::streamoff header_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff file_size = in.tellg();
  in.seekg(header_start);
  if (!in || header_start < 0 || int64_t(header_len) > file_size - header_start)
    return Error(path + ": truncated .npy header (it says " + std::to_string(header_len) +
                 " bytes); the file is corrupt");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) return Error(path + ": truncated .npy header");
  const std::optional<std::string> descr = npy_enclosed(header, "descr", '\'', '\'');
  if (!descr) return Error(path + ": .npy header has no 'descr'");
  DType dt;
  if (descr == "<f8")
    dt = DType::kF64;
  else if (descr == "<f4")
    dt = DType::kF32;
  else if (descr == "<f2")
    dt = DType::kF16;
  else
    return Error(path + ": .npy dtype '" + excerpt(*descr) +
                 "' is not supported; save as float32 (<f4), float64 or float16");
  if (const auto order = npy_value(header, "fortran_order"); order && order->rfind("True", 0) == 0)
    return Error(path +
                 ": Fortran-order .npy arrays are not supported; save with np.ascontiguousarray");
  const std::optional<std::string> dims_text = npy_enclosed(header, "shape", '(', ')');
  if (!dims_text) return Error(path + ": .npy header has no 'shape'");
  // Each dimension a whole number; the bytes they need must be in the file before anything is
  // allocated (a corrupt shape must not ask for terabytes).
  Shape shape;
  std::stringstream dims(*dims_text);
  std::string item;
  int64_t bytes = int64_t(dtype_size(dt));
  const int64_t data_bytes = file_size - in.tellg();
  while (std::getline(dims, item, ',')) {
    const std::size_t first = item.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    const std::size_t last = item.find_last_not_of(' ');
    const std::string digits = item.substr(first, last - first + 1);
    if (digits.empty() || digits.size() > 15 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return Error(path + ": .npy shape entry '" + excerpt(item) +
                   "' is not a whole number; the file is corrupt");
    shape.push_back(parse_number<int64_t>(digits).value_or(0));
    // Checked before each product, so it cannot overflow; the read below catches the rest.
    if (shape.back() != 0 && bytes > data_bytes / shape.back())
      return Error(path + ": .npy data is shorter than its shape " + shape_string(shape) +
                   " (so far) needs; the file is truncated");
    bytes *= shape.back();
  }
  Tensor t = Tensor::uninitialized(dt, shape);
  if (!in.read(reinterpret_cast<char*>(t.raw()), std::streamsize(t.nbytes())))
    return Error(path + ": .npy data is shorter than its shape " + shape_string(shape) +
                 " needs; the file is truncated");
  if (in.peek() != std::char_traits<char>::eof())
    return Error(path +
                 ": .npy file has bytes past the data its shape describes; the file is corrupt");
  return t;
}

Status write_npy(const std::string& path, const Tensor& t) {
  const char* descr = npy_descr(t.dtype());
  if (descr == nullptr)
    return Error("cannot write " + std::string(dtype_name(t.dtype())) + " to .npy (" + path +
                 "); numpy has no such dtype, use .safetensors");
  std::string shape;
  for (int64_t d : t.shape()) shape += std::to_string(d) + ",";
  if (t.rank() > 1) shape.pop_back();
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  return write_file_atomically(path, [&](std::ostream& out) -> Status {
    out.write("\x93NUMPY\x01\x00", 8);
    const uint16_t n = uint16_t(header.size());
    out.write(reinterpret_cast<const char*>(&n), 2);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(reinterpret_cast<const char*>(t.raw()), std::streamsize(t.nbytes()));
    return Status();
  });
}

Expected<NamedTensors> read_tensor_file(const std::string& path) {
  if (ends_with(path, ".safetensors")) {
    TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
    NamedTensors out;
    for (const SafetensorsEntry& e : file.entries()) {
      TP_ASSIGN_OR_RETURN(Tensor t, file.read(e));
      out.emplace_back(e.name, std::move(t));
    }
    return out;
  }
  if (ends_with(path, ".npy")) {
    TP_ASSIGN_OR_RETURN(Tensor t, read_npy(path));
    NamedTensors out;
    out.emplace_back("", std::move(t));
    return out;
  }
  if (ends_with(path, ".png")) {
    TP_ASSIGN_OR_RETURN(Tensor t, read_png(path));
    NamedTensors out;
    out.emplace_back("image", std::move(t));
    return out;
  }
  return Error(path + ": unknown file type; inputs are .safetensors, .npy or .png");
}

Status check_output_path(const std::string& path, std::size_t count) {
  if (ends_with(path, ".safetensors")) return Status();
  if (ends_with(path, ".npy")) {
    if (count != 1)
      return Error(path + ": a .npy file holds one tensor but this output has " +
                   std::to_string(count) + "; write a .safetensors file instead");
    return Status();
  }
  if (ends_with(path, ".png")) {
    if (count != 1)
      return Error(path + ": a PNG holds one image but this output has " + std::to_string(count) +
                   " tensors; write .safetensors");
    return Status();
  }
  return Error(path + ": unknown output type; write .safetensors, .npy or .png");
}

Status write_tensor_file(const std::string& path, const NamedTensors& tensors) {
  TP_RETURN_IF_ERROR(check_output_path(path, tensors.size()));
  if (ends_with(path, ".npy")) return write_npy(path, tensors[0].second);
  if (ends_with(path, ".png")) return write_png(path, tensors[0].second);
  return write_safetensors(path, tensors);
}

}  // namespace tp
