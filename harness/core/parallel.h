// When a loop is worth OpenMP's threads. A parallel region costs a fork and a barrier: a few
// microseconds on idle cores, and a scheduler time slice when another job holds a core and a
// waiting thread must be woken. Below these amounts of work a loop runs on the calling thread
// (docs/benchmarks.md, "Threads", has the measurements behind them).
#pragma once

#include <cstdint>

namespace tp {

// Elements of a memory-bound loop (elementwise ops, conversions, normalization): 0.5 MiB of fp32.
constexpr int64_t kParallelElements = int64_t(1) << 17;

// Multiply-adds of a compute-bound loop (a product, a direct conv): about 0.5 ms of one core.
constexpr int64_t kParallelMacs = int64_t(1) << 23;

}  // namespace tp
