// Implicit-GEMM convolution through cuDNN's graph API, for the `fused` kernel set: x NHWC
// [n, h, w, c] and weights KRSC [k, r, s, c] in f16 or bf16, accumulation and output in fp32
// (no rounding before the group's epilogue), on an engine cuDNN's heuristics rank first among
// those whose numerical notes allow none of: down-converted inputs, reduced-precision
// reduction, FFT, Winograd, non-determinism. No im2col patches are written. A problem cuDNN
// has no such engine for (e.g. 4 input channels) gets no plan and the caller runs the per-op
// kernels for it; why is kept for summary().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "compiled/fused_groups.h"
#include "harness/core/status.h"

namespace tp::compiled::cuda_impl {

// Every pointer handed to cuDNN must be this many bytes aligned (the tensors say so).
constexpr int64_t kCudnnAlignment = 16;

class CudnnConvs {
 public:
  // cuDNN's handle on `stream`; an error sentence when the library cannot start.
  static Expected<std::unique_ptr<CudnnConvs>> create(cudaStream_t stream);
  ~CudnnConvs();
  CudnnConvs(const CudnnConvs&) = delete;
  CudnnConvs& operator=(const CudnnConvs&) = delete;

  struct Planned;
  // The plan for `p`, built on first use and kept; null when cuDNN has no engine for it under
  // the rules above.
  const Planned* plan(const ConvProblem& p);
  static int64_t workspace_bytes(const Planned& plan);
  // y = conv(x, w) in fp32, on the stream; `workspace` holds workspace_bytes(plan).
  Status run(const Planned& plan, const void* x, const void* w, float* y, void* workspace);
  // For logs and benchmark labels: the library version, how many problems got an engine (and
  // which), and each one that did not, with cuDNN's reason.
  std::string summary() const;

 private:
  CudnnConvs() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tp::compiled::cuda_impl
