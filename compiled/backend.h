// Where plans run: the CPU emulation or a CUDA device. A backend owns the memory arenas live
// in, runs a plan group by group, and reads values back as NCHW host tensors. Both backends
// run the same plans under the same numerics contract (fp32 inside a group, one rounding at
// each group output), so their outputs differ only by summation order.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiled/executor.h"
#include "harness/core/cuda_choice.h"

namespace tp::compiled {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string device()
      const = 0;  // "cpu-emulated" or "cuda": part of plan keys and plan files
  virtual std::string description()
      const = 0;  // for humans: "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
  virtual int64_t available_bytes() const = 0;  // memory an arena may take now
  // An arena of `bytes`, poisoned with NaN so a value never written shows.
  virtual Expected<std::byte*> allocate(int64_t bytes) = 0;
  virtual void release(std::byte* arena) = 0;
  virtual Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs,
                         const GroupObserver& observe) = 0;
  // One group alone on given input values (see execute_group in executor.h).
  virtual Expected<std::vector<Tensor>> run_group(const Plan& plan, std::byte* arena, int index,
                                                  const Shape& input_shape,
                                                  const std::map<int, Tensor>& values) = 0;
  virtual Expected<Tensor> read(const Plan& plan, const std::byte* arena, int value,
                                const Shape& shape) = 0;
  // For logs: what the backend chose while running (the fused CUDA kernels: which convs got a
  // cuDNN engine and which ran per-op, and why); empty when there is nothing to say.
  virtual std::string notes() const { return ""; }
  // For benchmarks: time each group on the device from now on (true) or stop (false), and read
  // the milliseconds per group of `plan`, summed over the runs timed, with their count. A backend
  // that cannot time groups returns no times; timed runs launch directly (no CUDA graphs).
  virtual void time_groups(bool on) { (void)on; }
  struct GroupTimes {
    std::vector<double> milliseconds;  // per group, in plan order
    int runs = 0;
  };
  virtual GroupTimes group_times(const Plan& plan) const {
    (void)plan;
    return {};
  }
};

// Where the compiled path runs: the CPU emulation or the first CUDA device.
enum class Device : uint8_t { kCpu, kCuda };
Expected<Device> parse_device(std::string_view name);  // "cpu" | "cuda"; an error says which
const char* device_flag_name(Device device);           // "cpu" | "cuda"
const char* device_report_name(Device device);         // "cpu-emulated" | "cuda" (Backend::device)

// The one factory: the backend for `device` (CUDA as the environment says, or `cuda`; below),
// or an error sentence when this build has no CUDA or no device is visible.
Expected<std::unique_ptr<Backend>> make_backend(Device device);

std::unique_ptr<Backend> make_emulated_backend();

// The CUDA backend's kernel sets and graphs (harness/core/cuda_choice.h): fused kernels and
// CUDA graphs by default since gpu_tests, ci and field-reports passed with them on an H100
// (2026-11-26); per-op and direct launches stay selectable.
using tp::cuda_kernels_name;
using tp::CudaChoice;
using tp::CudaKernels;
using tp::parse_cuda_kernels;
// TWINPATH_CUDA_KERNELS, fused when unset; an error sentence for another value.
Expected<CudaKernels> cuda_kernels_from_environment();
// TWINPATH_CUDA_GRAPHS: "1" or unset replays each plan's group loop as a CUDA graph, captured
// on its second run (compiled/kernels/cuda/captured_plans.h); "0" launches every kernel from
// the host. An error sentence for another value.
Expected<bool> cuda_graphs_from_environment();
// Both, the defaults a run's --kernels and --cuda-graphs and a case's kernels= and graphs=
// override.
Expected<CudaChoice> cuda_choice_from_environment();

// The CUDA backend on device 0 with the kernels and graphs the environment names (or as
// given); an error sentence when this build has no CUDA or no device is visible.
Expected<std::unique_ptr<Backend>> make_cuda_backend();
Expected<std::unique_ptr<Backend>> make_cuda_backend(CudaKernels kernels, bool graphs = false);
// The backend for `device`, running CUDA plans as `cuda` says.
Expected<std::unique_ptr<Backend>> make_backend(Device device, const CudaChoice& cuda);

}  // namespace tp::compiled
