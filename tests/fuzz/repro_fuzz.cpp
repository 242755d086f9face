// Fuzz target: `twinpath replay` of a repro file (triage --repro): metadata, config JSON, every
// tensor checked against the graph it claims, then the origin group alone on the CPU.
#include "harness/runner/group_repro.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  (void)tp::replay_group_repro(tp::fuzz::input_file(data, size, ".safetensors"),
                               tp::compiled::Device::kCpu);
  return 0;
}
