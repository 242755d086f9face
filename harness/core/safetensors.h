// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of UTF-8 JSON, then one byte buffer that the tensors tile exactly.
// The reader memory-maps the file and enforces every rule of the reference Rust reader
// (huggingface/safetensors), one clear error per violation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/status.h"
#include "harness/core/tensor.h"

namespace tp {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // the file's dtype string, e.g. "F16"
  Shape shape;
  uint64_t begin = 0;  // data_offsets, relative to the data buffer
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  // Entries in data order (sorted by offset), as the reference reader validates them.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(const std::string& name) const;
  // One tensor: one of 1 MiB or more is a private mapping of its own bytes in the file (no copy
  // and no new memory: the page cache's pages until it is written to, page by page, which never
  // changes the file), a smaller one is copied out. Either way its pages leave the process when
  // it is dropped. A file written in place while its tensors live: see mapped_files.h.
  // Errors for dtypes twinpath does not compute with.
  Expected<Tensor> read(const SafetensorsEntry& entry) const;
  Expected<Tensor> read(const std::string& name) const;

 private:
  struct Mapping;
  friend Expected<SafetensorsFile> parse_mapped_safetensors(std::string path,
                                                            std::shared_ptr<const Mapping> m);
  std::string path_;
  std::shared_ptr<const Mapping> mapping_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The tensor called `name`, or nullptr.
inline const Tensor* find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

// Header padded with spaces to a multiple of 8; tensors laid out by descending alignment,
// then name, as the reference writer does. Written atomically.
Status write_safetensors(const std::string& path, const NamedTensors& tensors,
                         const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// The safetensors dtype string for a twinpath dtype ("F8_E4M3" for f8e4m3).
const char* safetensors_dtype(DType dt);

}  // namespace tp
