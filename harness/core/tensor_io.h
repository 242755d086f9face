// Reading and writing tensors by file extension: .safetensors (any number of named tensors)
// .npy (one tensor; '<f8', '<f4', '<f2', C order) and .png (one RGB image, named "image", in
// [-1, 1] as diffusers' image processor maps it).
#pragma once

#include <string>

#include "harness/core/safetensors.h"

namespace tp {

Expected<NamedTensors> read_tensor_file(const std::string& path);
Status write_tensor_file(const std::string& path, const NamedTensors& tensors);

// Checks, before any work is done, that `path` names a file type that can hold `count` tensors.
Status check_output_path(const std::string& path, std::size_t count);

Expected<Tensor> read_npy(const std::string& path);
Status write_npy(const std::string& path, const Tensor& tensor);

}  // namespace tp
