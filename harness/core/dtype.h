// The numeric types twinpath stores and computes in, and their exact conversions.
// All narrowing conversions round to nearest, ties to even, from double (which holds every
// f32 exactly, so f32 -> x is a single rounding too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "harness/core/status.h"

namespace tp {

enum class DType : uint8_t { kF64, kF32, kF16, kBF16, kF8E4M3, kF8E5M2 };

// What an fp8 conversion does with a value past the largest finite one.
// kSaturate clamps to +-max (NaN stays NaN); kNonSaturating gives +-inf for e5m2 and NaN for
// e4m3fn, which has no infinity (as torch's .to(float8_e4m3fn) and CUDA's __NV_NOSAT do).
// f16 and bf16 always overflow to +-inf.
enum class Saturation : uint8_t { kNonSaturating, kSaturate };

const char* dtype_name(DType dt);                    // "f16"
Expected<DType> parse_dtype(std::string_view name);  // accepts "f16"; error lists the names
std::size_t dtype_size(DType dt);                    // bytes per element
bool dtype_is_fp8(DType dt);
double dtype_max_finite(DType dt);  // 65504 for f16, 448 for f8e4m3
double dtype_epsilon(DType dt);     // spacing above 1.0

// Bit-level encoders/decoders for the narrow types (the low 8 or 16 bits are used).
uint32_t encode_narrow(DType dt, double x, Saturation sat = Saturation::kNonSaturating);
double decode_narrow(DType dt, uint32_t bits);

// encode_narrow(kF16 / kBF16, x) for a float, without saturation, computed from its bits (the
// same results on every float, and an order of magnitude faster).
uint16_t f32_to_f16_bits(float x);
inline float f16_bits_to_f32(uint16_t b) { return float(decode_narrow(DType::kF16, b)); }
uint16_t f32_to_bf16_bits(float x);
inline float bf16_bits_to_f32(uint16_t b) { return float(decode_narrow(DType::kBF16, b)); }

// Converts n elements between any two dtypes (one rounding, per the rules above).
void convert_elements(const void* src, DType src_dt, void* dst, DType dst_dt, std::size_t n,
                      Saturation sat = Saturation::kNonSaturating);

// Rounds values through a dtype and back (x -> dt -> double), e.g. to emulate a store.
double round_through(DType dt, double x, Saturation sat = Saturation::kNonSaturating);

}  // namespace tp
