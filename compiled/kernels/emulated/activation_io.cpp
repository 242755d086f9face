// Stores of group outputs: the one rounding per group the numerics contract allows.
// Eigen's half/bfloat16 conversions round to nearest even and overflow to inf (the unit tests
// check them against our own encoder bit for bit).
#include <Eigen/Core>
#include <cmath>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"

namespace tp::compiled::emulated {

namespace {

// The truncating-store faults: a magnitude RNE rounded up is stepped back one code (sign and
// magnitude encodings are monotone in the magnitude), which is rounding toward zero.
template <class H>
void truncate_after_rounding(const float* src, int64_t n, H* out) {
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(src[i]) && std::fabs(float(out[i])) > std::fabs(src[i]))
      out[i] = Eigen::numext::bit_cast<H>(uint16_t(Eigen::numext::bit_cast<uint16_t>(out[i]) - 1));
}

}  // namespace

void store_rounded(const float* src, int64_t n, DType dt, void* dst, bool truncate) {
  store_rounded(src, n, dt, dst);
  if (!truncate) return;
  if (dt == DType::kF16) truncate_after_rounding(src, n, static_cast<Eigen::half*>(dst));
  if (dt == DType::kBF16) truncate_after_rounding(src, n, static_cast<Eigen::bfloat16*>(dst));
}

void store_rounded(const float* src, int64_t n, DType dt, void* dst) {
  switch (dt) {
    case DType::kF32:
      std::memcpy(dst, src, std::size_t(n) * sizeof(float));
      return;
    case DType::kF16: {
      auto* out = static_cast<Eigen::half*>(dst);
#if defined(__F16C__)
      // Eight at a time with the same instruction Eigen uses one at a time (vcvtps2ph, nearest
      // even); the tail below.
      const int64_t blocks = n / 8;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < blocks; ++i)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + 8 * i),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      for (int64_t i = blocks * 8; i < n; ++i) out[i] = Eigen::half(src[i]);
#else
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) out[i] = Eigen::half(src[i]);
#endif
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
#if defined(__F16C__)
      const int64_t blocks = n / 8;  // exact either way; eight at a time with vcvtph2ps
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < blocks; ++i)
        _mm256_storeu_ps(
            dst + 8 * i,
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 8 * i))));
      for (int64_t i = blocks * 8; i < n; ++i) dst[i] = float(in[i]);
#else
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) dst[i] = float(in[i]);
#endif
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

RoundedOperand::RoundedOperand(const Tensor& t, DType dt) : t_(&t) {
  if (dt == DType::kF32) return;
  copied_ = true;
  rounded_ = Tensor::uninitialized(DType::kF32, t.shape());
  const float* src = t.data<float>();
  float* dst = rounded_.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = round_to(dt, src[i]);
}

}  // namespace tp::compiled::emulated
