// Fuzz target: the .png reader (libpng under twinpath's checks of depth, channels and size).
#include "harness/core/png_io.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  (void)tp::read_png(tp::fuzz::input_file(data, size, ".png"));
  return 0;
}
