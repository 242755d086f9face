// The CPU emulation as a backend: arenas in host memory, plans run by execute().
#include <cstring>
#include <fstream>

#include "compiled/backend.h"
#include "harness/core/memory.h"

namespace tp::compiled {
namespace {

class EmulatedBackend final : public Backend {
 public:
  std::string device() const override { return "cpu-emulated"; }
  std::string description() const override { return "CPU emulation of the compiled kernels"; }
  int64_t available_bytes() const override {
    const int64_t available = available_memory_bytes();
    return available < 0 ? int64_t(1) << 62 : available;  // unknown: do not refuse
  }
  Expected<std::byte*> allocate(int64_t bytes) override {
    auto* p = new (std::nothrow) std::byte[std::size_t(std::max<int64_t>(bytes, 1))];
    if (!p)
      return Error("could not allocate " + std::to_string(bytes) +
                   " bytes of host memory for an arena");
    std::memset(p, 0xFF, std::size_t(bytes));  // NaN in f32, f16 and bf16
    return p;
  }
  void release(std::byte* arena) override { delete[] arena; }
  Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs,
                 const GroupObserver& observe) override {
    return compiled::execute(plan, arena, inputs, observe);
  }
  Expected<std::vector<Tensor>> run_group(const Plan& plan, std::byte* arena, int index,
                                          const Shape& input_shape,
                                          const std::map<int, Tensor>& values) override {
    return execute_group(plan, arena, index, input_shape, values);
  }
  Expected<Tensor> read(const Plan& plan, const std::byte* arena, int value,
                        const Shape& shape) override {
    return read_value(plan, arena, value, shape);
  }
};

}  // namespace

std::unique_ptr<Backend> make_emulated_backend() { return std::make_unique<EmulatedBackend>(); }

}  // namespace tp::compiled
