// Fuzz target: HDF5 reports as `report show|diff|merge` and `run --resume` load them.
#include "reports/h5_report.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  (void)tp::read_h5_report(tp::fuzz::input_file(data, size, ".h5"));
  return 0;
}
