// Fuzz target: the safetensors reader (header JSON, offsets, dtypes) and every tensor it lists.
#include "harness/core/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  auto file = tp::SafetensorsFile::open(tp::fuzz::input_file(data, size, ".safetensors"));
  if (!file.ok()) return 0;
  for (const tp::SafetensorsEntry& e : file->entries()) (void)file->read(e);
  return 0;
}
