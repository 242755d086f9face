// Fuzz target: the .npy reader (magic, version, header dict, shape, dtype, data length).
#include "harness/core/tensor_io.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  (void)tp::read_npy(tp::fuzz::input_file(data, size, ".npy"));
  return 0;
}
