#include "harness/core/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tp {
namespace {

// A binary floating-point format narrower than f32: sign, exponent and mantissa fields.
struct NarrowFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_inf;         // IEEE-style all-ones exponent = inf/NaN (false for e4m3fn)
  uint32_t max_finite;  // magnitude bits of the largest finite value
  uint32_t inf;         // magnitude bits of +inf (unused when !has_inf)
  uint32_t nan;         // magnitude bits of the canonical NaN
  int sign_shift;       // 15 for 16-bit types, 7 for fp8
};

const NarrowFormat& format_of(DType dt) {
  static const NarrowFormat kF16{5, 10, 15, true, 0x7BFF, 0x7C00, 0x7E00, 15};
  static const NarrowFormat kBF16{8, 7, 127, true, 0x7F7F, 0x7F80, 0x7FC0, 15};
  // e4m3fn: exponent 1111 is a normal binade; only S.1111.111 is NaN, so max = 1.75 * 2^8.
  static const NarrowFormat kE4M3{4, 3, 7, false, 0x7E, 0, 0x7F, 7};
  static const NarrowFormat kE5M2{5, 2, 15, true, 0x7B, 0x7C, 0x7E, 7};
  switch (dt) {
    case DType::kF16:
      return kF16;
    case DType::kBF16:
      return kBF16;
    case DType::kF8E4M3:
      return kE4M3;
    case DType::kF8E5M2:
      return kE5M2;
    default:
      break;
  }
  TP_CHECK(false, std::string("not a narrow dtype: ") + dtype_name(dt));
  return kF16;  // unreachable
}

}  // namespace

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::kF64:
      return "f64";
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF8E4M3:
      return "f8e4m3";
    case DType::kF8E5M2:
      return "f8e5m2";
  }
  return "?";
}

Expected<DType> parse_dtype(std::string_view name) {
  for (DType dt :
       {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2}) {
    if (name == dtype_name(dt)) return dt;
  }
  return Error("unknown dtype '" + std::string(name) +
               "'; use one of f64, f32, f16, bf16, f8e4m3, f8e5m2");
}

std::size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kF64:
      return 8;
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 1;
  }
  return 0;
}

bool dtype_is_fp8(DType dt) { return dt == DType::kF8E4M3 || dt == DType::kF8E5M2; }

double dtype_max_finite(DType dt) {
  if (dt == DType::kF64) return std::numeric_limits<double>::max();
  if (dt == DType::kF32) return std::numeric_limits<float>::max();
  return decode_narrow(dt, format_of(dt).max_finite);
}

double dtype_epsilon(DType dt) {
  if (dt == DType::kF64) return std::numeric_limits<double>::epsilon();
  if (dt == DType::kF32) return std::numeric_limits<float>::epsilon();
  return std::ldexp(1.0, -format_of(dt).mantissa_bits);
}

uint32_t encode_narrow(DType dt, double x, Saturation sat) {
  const NarrowFormat& f = format_of(dt);
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  const uint32_t sign = uint32_t(b >> 63) << f.sign_shift;
  const int exp_field = int((b >> 52) & 0x7FF);
  const uint64_t frac = b & ((uint64_t(1) << 52) - 1);

  if (exp_field == 0x7FF) {
    if (frac != 0) return sign | f.nan;  // NaN stays NaN
    if (f.has_inf && sat == Saturation::kNonSaturating) return sign | f.inf;
    return sign | (sat == Saturation::kSaturate ? f.max_finite : f.nan);
  }
  if (exp_field == 0) return sign;  // zero, or a double subnormal: far below any narrow type

  const int e = exp_field - 1023;
  const uint64_t significand = (uint64_t(1) << 52) | frac;  // 53 bits: 1.frac
  const int min_normal_exp = 1 - f.bias;
  // Keep mantissa_bits fraction bits, more shifted out for results in the subnormal range.
  int shift = 52 - f.mantissa_bits + (e < min_normal_exp ? min_normal_exp - e : 0);
  uint64_t q;
  if (shift >= 64) {
    q = 0;
  } else {
    q = significand >> shift;
    const uint64_t rem = significand & ((uint64_t(1) << shift) - 1);
    const uint64_t half = uint64_t(1) << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;  // round to nearest, ties to even
  }
  uint64_t magnitude;
  if (e < min_normal_exp) {
    magnitude = q;  // subnormal; q == 2^M lands exactly on the smallest normal's encoding
  } else {
    int biased = e + f.bias;
    if (q == (uint64_t(1) << (f.mantissa_bits + 1))) {  // rounding carried into the exponent
      q >>= 1;
      ++biased;
    }
    magnitude = (uint64_t(biased) << f.mantissa_bits) | (q - (uint64_t(1) << f.mantissa_bits));
  }
  if (magnitude > f.max_finite) {  // encodings are monotone, so this is exactly "overflowed"
    if (sat == Saturation::kSaturate && dtype_is_fp8(dt)) return sign | f.max_finite;
    return sign | (f.has_inf ? f.inf : f.nan);
  }
  return sign | uint32_t(magnitude);
}

double decode_narrow(DType dt, uint32_t bits) {
  const NarrowFormat& f = format_of(dt);
  const bool negative = (bits >> f.sign_shift) & 1;
  const uint32_t magnitude = bits & ((1u << f.sign_shift) - 1);
  const uint32_t exp_all_ones = (1u << f.exponent_bits) - 1;
  const uint32_t exp_field = magnitude >> f.mantissa_bits;
  const uint32_t mant = magnitude & ((1u << f.mantissa_bits) - 1);
  double v;
  if (f.has_inf && exp_field == exp_all_ones) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && magnitude == f.nan) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp_field == 0) {
    v = std::ldexp(double(mant), 1 - f.bias - f.mantissa_bits);
  } else {
    v = std::ldexp(double(mant | (1u << f.mantissa_bits)),
                   int(exp_field) - f.bias - f.mantissa_bits);
  }
  return negative ? -v : v;
}

namespace {

// Every f16, bf16 and fp8 bit pattern decoded once, by decode_narrow's own rule: widening is
// then a lookup.
const double* decode_table(DType dt) {
  auto build = [](DType d, uint32_t count) {
    std::vector<double> t(count);
    for (uint32_t b = 0; b < count; ++b) t[b] = decode_narrow(d, b);
    return t;
  };
  static const std::vector<double> f16 = build(DType::kF16, 1u << 16),
                                   bf16 = build(DType::kBF16, 1u << 16),
                                   e4m3 = build(DType::kF8E4M3, 1u << 8),
                                   e5m2 = build(DType::kF8E5M2, 1u << 8);
  switch (dt) {
    case DType::kF16:
      return f16.data();
    case DType::kBF16:
      return bf16.data();
    case DType::kF8E4M3:
      return e4m3.data();
    case DType::kF8E5M2:
      return e5m2.data();
    default:
      return nullptr;
  }
}

double load_element(const void* src, DType dt, const double* table, std::size_t i) {
  switch (dt) {
    case DType::kF64:
      return static_cast<const double*>(src)[i];
    case DType::kF32:
      return static_cast<const float*>(src)[i];
    case DType::kF16:
    case DType::kBF16:
      return table[static_cast<const uint16_t*>(src)[i]];
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return table[static_cast<const uint8_t*>(src)[i]];
  }
  return 0;
}

void store_element(void* dst, DType dt, std::size_t i, double v, Saturation sat) {
  switch (dt) {
    case DType::kF64:
      static_cast<double*>(dst)[i] = v;
      return;
    case DType::kF32:
      static_cast<float*>(dst)[i] = float(v);
      return;  // IEEE RNE
    case DType::kF16:
    case DType::kBF16:
      static_cast<uint16_t*>(dst)[i] = uint16_t(encode_narrow(dt, v, sat));
      return;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      static_cast<uint8_t*>(dst)[i] = uint8_t(encode_narrow(dt, v, sat));
      return;
  }
}

}  // namespace

// Round to nearest even, overflow to inf, NaN to the canonical NaN (checked against
// encode_narrow on every float by DType.FastF32NarrowingMatchesEncodeNarrow).
uint16_t f32_to_f16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u, abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return uint16_t(sign | 0x7E00u);
  if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // from 65520 (the tie): inf
  if (abs < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    if (abs < 0x33000000u) return uint16_t(sign);           // below 2^-25: zero
    const uint32_t e = abs >> 23, m = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // units of 2^-24
    const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return uint16_t(sign | (q + (rem > half || (rem == half && (q & 1u)))));
  }
  const uint32_t r = abs - ((127u - 15u) << 23);  // rebias the exponent
  return uint16_t(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
}

uint16_t f32_to_bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((bits >> 16) & 0x8000u) | 0x7FC0u);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

namespace {

// Elements [begin, end): the common pairs as plain loops, the rest element by element.
void convert_range(const void* src, DType src_dt, void* dst, DType dst_dt, std::size_t begin,
                   std::size_t end, Saturation sat) {
  const double* table = decode_table(src_dt);
  if (src_dt == DType::kF32 && dst_dt == DType::kF64) {
    const float* s = static_cast<const float*>(src);
    double* d = static_cast<double*>(dst);
    for (std::size_t i = begin; i < end; ++i) d[i] = s[i];
  } else if (src_dt == DType::kF64 && dst_dt == DType::kF32) {
    const double* s = static_cast<const double*>(src);
    float* d = static_cast<float*>(dst);
    for (std::size_t i = begin; i < end; ++i) d[i] = float(s[i]);
  } else if (src_dt == DType::kF32 && dst_dt == DType::kF16 && sat == Saturation::kNonSaturating) {
    const float* s = static_cast<const float*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (std::size_t i = begin; i < end; ++i) d[i] = f32_to_f16_bits(s[i]);
  } else if (src_dt == DType::kF32 && dst_dt == DType::kBF16 && sat == Saturation::kNonSaturating) {
    const float* s = static_cast<const float*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (std::size_t i = begin; i < end; ++i) d[i] = f32_to_bf16_bits(s[i]);
  } else if (table && dst_dt == DType::kF64) {
    double* d = static_cast<double*>(dst);
    for (std::size_t i = begin; i < end; ++i) d[i] = load_element(src, src_dt, table, i);
  } else if (table && dst_dt == DType::kF32) {  // exact: every narrow value is an fp32 value
    float* d = static_cast<float*>(dst);
    for (std::size_t i = begin; i < end; ++i) d[i] = float(load_element(src, src_dt, table, i));
  } else {
    for (std::size_t i = begin; i < end; ++i)
      store_element(dst, dst_dt, i, load_element(src, src_dt, table, i), sat);
  }
}

}  // namespace

void convert_elements(const void* src, DType src_dt, void* dst, DType dst_dt, std::size_t n,
                      Saturation sat) {
  if (n == 0) return;  // an empty tensor's storage may be null
  if (src_dt == dst_dt) {
    std::memcpy(dst, src, n * dtype_size(src_dt));
    return;
  }
  // Serial: the report library links the core without OpenMP (report_link_alone); callers
  // that convert in parallel (compare_tensors) split the work themselves.
  convert_range(src, src_dt, dst, dst_dt, 0, n, sat);
}

double round_through(DType dt, double x, Saturation sat) {
  if (dt == DType::kF64) return x;
  if (dt == DType::kF32) return double(float(x));
  return decode_narrow(dt, encode_narrow(dt, x, sat));
}

}  // namespace tp
