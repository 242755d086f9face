// Stores of group outputs: the one rounding per group the numerics contract allows.
// Eigen's half/bfloat16 conversions round to nearest even and overflow to inf (the unit tests
// check them against our own encoder bit for bit).
#include <Eigen/Core>
#include <cstring>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

namespace tp::compiled::emulated {

void store_rounded(const float* src, int64_t n, DType dt, void* dst) {
  switch (dt) {
    case DType::kF32:
      std::memcpy(dst, src, std::size_t(n) * sizeof(float));
      return;
    case DType::kF16: {
      auto* out = static_cast<Eigen::half*>(dst);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) out[i] = Eigen::half(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<Eigen::bfloat16*>(dst);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) out[i] = Eigen::bfloat16(src[i]);
      return;
    }
    default:
      TP_CHECK(false, std::string("activations are not stored in ") + dtype_name(dt));
  }
}

void load_f32(const void* src, DType dt, int64_t n, float* dst) {
  switch (dt) {
    case DType::kF32:
      std::memcpy(dst, src, std::size_t(n) * sizeof(float));
      return;
    case DType::kF16: {
      const auto* in = static_cast<const Eigen::half*>(src);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) dst[i] = float(in[i]);
      return;
    }
    case DType::kBF16: {
      const auto* in = static_cast<const Eigen::bfloat16*>(src);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) dst[i] = float(in[i]);
      return;
    }
    default:
      TP_CHECK(false, std::string("activations are not stored in ") + dtype_name(dt));
  }
}

float round_to(DType dt, float x) {
  switch (dt) {
    case DType::kF16:
      return float(Eigen::half(x));
    case DType::kBF16:
      return float(Eigen::bfloat16(x));
    default:
      return x;
  }
}

}  // namespace tp::compiled::emulated
