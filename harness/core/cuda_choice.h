// How the CUDA backend runs a plan, as a case line (kernels=, graphs=), the run command
// (--kernels, --cuda-graphs) and a report's header name it: the kernel set, and whether a plan's
// group loop replays as a CUDA graph. Every choice keeps the one numerics contract, so a choice
// changes speed and summation order, never what the contract allows; it is recorded so that a
// failure reproduces from its line. The environment's TWINPATH_CUDA_KERNELS and
// TWINPATH_CUDA_GRAPHS give the defaults (compiled/backend.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "harness/core/status.h"

namespace tp {

//  - fused (the default since the H100 run of 2026-11-26): cuDNN implicit-GEMM convs (fp32
//  accumulation and output, no patches) with scale,
//    bias, residual and the rounding store in one epilogue pass, and GroupNorm [+ SiLU] with
//    its store in one pass (compiled/fused_groups.h); other groups as per-op;
//  - per-op: the kernels of the first GPU runs, kept selectable: convs as im2col patches and a
//    cuBLAS GEMM, and every op's fp32 result through device memory before the one rounding.
enum class CudaKernels : uint8_t { kPerOp, kFused };

// "per-op" | "fused"; the error begins with the value as the user gave it: `spelled` is
// "kernels=", "--kernels " or "TWINPATH_CUDA_KERNELS=".
Expected<CudaKernels> parse_cuda_kernels(std::string_view name,
                                         std::string_view spelled = "TWINPATH_CUDA_KERNELS=");
const char* cuda_kernels_name(CudaKernels kernels);
// "on" | "off", the error as parse_cuda_kernels'.
Expected<bool> parse_cuda_graphs(std::string_view value, std::string_view spelled);

struct CudaChoice {
  CudaKernels kernels = CudaKernels::kFused;
  bool graphs = true;
  // As a case line writes it: "kernels=fused graphs=on".
  std::string text() const;
};

}  // namespace tp
