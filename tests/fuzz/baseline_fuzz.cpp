// Fuzz target: the gate's baseline (cases/baselines/ci.txt.gz's format, plain or gzipped).
#include "reports/baseline.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  (void)tp::read_baseline(tp::fuzz::input_file(data, size, ".txt"));
  return 0;
}
