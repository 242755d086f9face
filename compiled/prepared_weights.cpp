#include "compiled/prepared_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "harness/core/parallel.h"

namespace tp::compiled {

int64_t PreparedParam::count() const {
  return codes.empty() ? int64_t(values.size()) : int64_t(codes.size() / dtype_size(storage));
}

int64_t PreparedParam::storage_bytes() const {
  return count() * int64_t(dtype_size(storage)) + int64_t(scales.size() * sizeof(float));
}

namespace {

// Every value of a narrow dtype with `n` codes, as floats (exact).
std::vector<float> code_values(DType dt, uint32_t n) {
  std::vector<float> t(n);
  for (uint32_t b = 0; b < n; ++b) t[b] = float(decode_narrow(dt, b));
  return t;
}

const float* code_table(DType dt) {
  static const std::vector<float> f16 = code_values(DType::kF16, 1u << 16),
                                  e4m3 = code_values(DType::kF8E4M3, 1u << 8),
                                  e5m2 = code_values(DType::kF8E5M2, 1u << 8);
  return dt == DType::kF16 ? f16.data() : dt == DType::kF8E4M3 ? e4m3.data() : e5m2.data();
}

uint16_t code16(const uint8_t* codes, int64_t i) {
  uint16_t c;
  std::memcpy(&c, codes + 2 * i, sizeof c);
  return c;
}

float bf16_value(uint16_t code) {
  const uint32_t bits = uint32_t(code) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// f16 codes [begin, end) to floats: the hardware's exact conversion where the build has it.
void decode_f16(const uint8_t* codes, float* out, int64_t begin, int64_t end) {
  int64_t i = begin;
#if defined(__AVX512F__)
  for (; i + 16 <= end; i += 16)
    _mm512_storeu_ps(
        out + i,
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 2 * i))));
#elif defined(__F16C__)
  for (; i + 8 <= end; i += 8)
    _mm256_storeu_ps(
        out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 2 * i))));
#endif
  const float* table = code_table(DType::kF16);
  for (; i < end; ++i) out[i] = table[code16(codes, i)];
}

// Codes [begin, end) to floats, on the calling thread (a linear's weight row is decoded per
// panel, millions of times a step: no parallel region per call).
void decode_range(DType dt, const uint8_t* codes, float* out, int64_t begin, int64_t end) {
  if (dt == DType::kF16) return decode_f16(codes, out, begin, end);
  if (dt == DType::kBF16) {
    for (int64_t i = begin; i < end; ++i) out[i] = bf16_value(code16(codes, i));
    return;
  }
  const float* table = code_table(dt);
  for (int64_t i = begin; i < end; ++i) out[i] = table[codes[i]];
}

// The thread's buffers for decoded weights, one per ParamFloats alive on it, kept between calls.
struct DecodeScratch {
  std::vector<std::vector<float>> buffers;
  std::size_t depth = 0;
};
thread_local DecodeScratch scratch;

}  // namespace

void decode_codes(DType dt, const uint8_t* codes, float* out, int64_t n) {
  constexpr int64_t kChunk = int64_t(1) << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  if (n < kParallelElements) return decode_range(dt, codes, out, 0, n);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c)
    decode_range(dt, codes, out, c * kChunk, std::min(n, (c + 1) * kChunk));
}

void encode_codes(DType dt, const float* in, uint8_t* out, int64_t n) {
  int64_t i = 0;
  if (dt == DType::kBF16) {
    for (; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, in + i, sizeof bits);
      const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
      const uint16_t c = nan ? uint16_t(((bits >> 16) & 0x8000u) | 0x7FC0u)
                             : uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
      std::memcpy(out + 2 * i, &c, sizeof c);
    }
    return;
  }
#if defined(__AVX512F__)
  // The hardware's round to nearest even (overflow to inf, subnormals kept); a block with a NaN
  // is left to the loop below, which makes it the canonical NaN as f32_to_f16_bits does.
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(in + i);
    if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) break;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) {
    const uint16_t c = f32_to_f16_bits(in[i]);
    std::memcpy(out + 2 * i, &c, sizeof c);
  }
}

ParamFloats::ParamFloats(const PreparedParam& p) : count_(p.count()) {
  if (p.codes.empty()) {
    data_ = p.values.data();
    return;
  }
  if (scratch.depth == scratch.buffers.size()) scratch.buffers.emplace_back();
  std::vector<float>& buffer = scratch.buffers[scratch.depth++];
  if (int64_t(buffer.size()) < count_) buffer = std::vector<float>(std::size_t(count_));
  decode_codes(p.storage, p.codes.data(), buffer.data(), count_);
  data_ = buffer.data();
  decoded_ = true;
}

ParamFloats::~ParamFloats() {
  if (decoded_) --scratch.depth;
}

sgemm::PackB weight_rows_packer(const PreparedParam& w) {
  const int64_t k = w.count() / w.shape[0];
  if (w.codes.empty()) return sgemm::pack_strided({w.values.data(), 1, k});
  const std::size_t size = dtype_size(w.storage);
  return sgemm::pack_rows([&w, k, size](int64_t row, int64_t k0, int64_t kc, float* out) {
    decode_range(w.storage, w.codes.data() + std::size_t(row * k + k0) * size, out, 0, kc);
  });
}

uint64_t weights_identity(const Weights& weights) {
  // Four independent multiply-rotate lanes over 8-byte words, then mixed: fast enough to
  // hash an 84M-parameter VAE on every load, and any changed bit changes the result.
  uint64_t lanes[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull,
                       0x27D4EB2F165667C5ull};
  auto mix = [](uint64_t h, uint64_t w) {
    h ^= w * 0x87C37B91114253D5ull;
    h = (h << 31) | (h >> 33);
    return h * 0x4CF5AD432745937Full;
  };
  uint64_t meta = 0;
  for (const auto& [key, t] : weights) {
    for (unsigned char c : key) meta = mix(meta, c);
    meta = mix(meta, uint64_t(t.dtype()));
    for (int64_t d : t.shape()) meta = mix(meta, uint64_t(d));
    const std::byte* p = t.raw();
    const std::size_t n = t.nbytes();
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32)
      for (int l = 0; l < 4; ++l) {
        uint64_t w;
        std::memcpy(&w, p + i + 8 * std::size_t(l), 8);
        lanes[l] = mix(lanes[l], w);
      }
    for (; i < n; ++i) lanes[0] = mix(lanes[0], uint64_t(p[i]));
  }
  uint64_t h = meta;
  for (uint64_t l : lanes) h = mix(h, l);
  return h ^ (h >> 29);
}

DType param_storage(const LayerPolicy& policy, bool matrix) {
  if (dtype_is_fp8(policy.weight) && !matrix && !policy.layerwise) return DType::kF32;
  return policy.weight;
}

namespace {

// Hands a parameter to fn(offset, row, count) in rows of the layout the kernels read, in
// parallel: a conv's weight [Cout][Cin][*K] one output channel at a time as [*K][Cin], anything
// else in chunks as it is.
template <class T, class Fn>
void for_each_laid_out_row(const T* w, const Shape& s, bool matrix, Fn fn) {
  const int64_t n = shape_numel(s);
  if (!matrix || s.size() < 3) {
    constexpr int64_t kChunk = int64_t(1) << 16;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t c = 0; c < chunks; ++c)
      fn(c * kChunk, w + c * kChunk, std::min(kChunk, n - c * kChunk));
    return;
  }
  const int64_t co = s[0], ci = s[1], taps = n / (co * ci), len = ci * taps;
#pragma omp parallel if (n >= kParallelElements)
  {
    std::vector<T> row(static_cast<std::size_t>(len));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < co; ++o) {
      const T* from = w + o * len;
      for (int64_t c = 0; c < ci; ++c)
        for (int64_t t = 0; t < taps; ++t) row[std::size_t(t * ci + c)] = from[c * taps + t];
      fn(o * len, row.data(), len);
    }
  }
}

// f32, f16 or bf16 storage of weights that are floats (f32, f16, bf16 on disk): laid out and
// rounded in float, by the narrow dtype's bits (the same values as round_through:
// DType.FastF32NarrowingMatchesEncodeNarrow), in one pass without the f64 copies fp8 scaling
// needs. A matrix in f16 or bf16 keeps its codes alone.
void round_floats(const Tensor& source, bool matrix, PreparedParam& p) {
  Tensor widened;
  if (source.dtype() != DType::kF32) widened = source.to(DType::kF32);
  const float* w = source.dtype() == DType::kF32 ? source.data<float>() : widened.data<float>();
  const int64_t n = source.numel();
  const DType dt = p.storage;
  if (dt != DType::kF32 && matrix) {
    p.codes.resize(std::size_t(2 * n));
    uint8_t* codes = p.codes.data();
    for_each_laid_out_row(w, p.shape, matrix,
                          [codes, dt](int64_t at, const float* row, int64_t count) {
                            encode_codes(dt, row, codes + 2 * at, count);
                          });
    return;
  }
  p.values.resize(std::size_t(n));
  float* values = p.values.data();
  for_each_laid_out_row(w, p.shape, matrix,
                        [values, dt](int64_t at, const float* row, int64_t count) {
                          if (dt == DType::kF32) {
                            std::copy(row, row + count, values + at);
                            return;
                          }
                          std::vector<uint8_t> codes(static_cast<std::size_t>(2 * count));
                          encode_codes(dt, row, codes.data(), count);
                          decode_codes(dt, codes.data(), values + at, count);
                        });
}

// Stores value i of `p` from its code: the code itself for a matrix held as codes, else its
// decoded value.
void store_code(PreparedParam& p, std::size_t i, uint32_t code) {
  if (p.codes.empty()) {
    p.values[i] = float(decode_narrow(p.storage, code));
  } else if (dtype_size(p.storage) == 2) {
    const uint16_t c = uint16_t(code);
    std::memcpy(p.codes.data() + 2 * i, &c, sizeof c);
  } else {
    p.codes[i] = uint8_t(code);
  }
}

// The fp8-round-half-away fault: where round-to-nearest-even chose the smaller magnitude at an
// exact tie, the larger one (the next encoding; past the largest finite one it saturates as the
// policy says).
uint32_t round_tie_away(DType dt, double x, uint32_t bits, Saturation sat) {
  const double down = std::fabs(decode_narrow(dt, bits)), a = std::fabs(x);
  if (!(down < a)) return bits;
  double up = std::fabs(decode_narrow(dt, bits + 1));
  const bool past_max = !std::isfinite(up);  // the next encoding is inf or NaN: step as below it
  if (past_max) up = down + (down - std::fabs(decode_narrow(dt, bits - 1)));
  if (a - down != up - a) return bits;
  return past_max && sat == Saturation::kSaturate ? bits : bits + 1;
}

PreparedParam prepare(const Tensor& source, const std::string& key, const LayerPolicy& policy,
                      bool matrix, bool fp8_no_scale, bool fp8_half_away) {
  PreparedParam p;
  p.key = key;
  p.storage = param_storage(policy, matrix);
  p.shape = source.shape();
  if (!dtype_is_fp8(p.storage) && source.dtype() != DType::kF64 &&
      (p.storage == DType::kF32 || p.storage == DType::kF16 || p.storage == DType::kBF16)) {
    round_floats(source, matrix, p);
    return p;
  }
  const Tensor f64 = source.to(DType::kF64);
  std::vector<double> w(std::size_t(f64.numel()));
  double* laid_out = w.data();
  for_each_laid_out_row(f64.data<double>(), p.shape, matrix,
                        [laid_out](int64_t at, const double* row, int64_t count) {
                          std::copy(row, row + count, laid_out + at);
                        });
  if (p.storage == DType::kF32 || p.storage == DType::kF64) {
    p.values.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) p.values[i] = float(round_through(p.storage, w[i]));
    return p;
  }
  if (matrix)
    p.codes.resize(w.size() * dtype_size(p.storage));
  else
    p.values.resize(w.size());
  if (!dtype_is_fp8(p.storage)) {
    const int64_t n = int64_t(w.size());
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      store_code(p, std::size_t(i), encode_narrow(p.storage, w[std::size_t(i)]));
    return p;
  }
  const int64_t rows = p.shape[0];
  const int64_t per_row = int64_t(w.size()) / rows;
  // The value each scale maps to the format's largest: max|w|, or the clip= quantile of |w| by
  // nearest rank, over each row or over the tensor.
  std::vector<double> amax(std::size_t(rows), 0.0);
  const bool per_tensor = policy.scale == ScaleGranularity::kPerTensor;
  const int64_t span = per_tensor ? int64_t(w.size()) : per_row;
  for (int64_t r = 0; r < (per_tensor ? 1 : rows); ++r) {
    std::vector<double> a(static_cast<std::size_t>(span));
    for (int64_t i = 0; i < span; ++i) a[std::size_t(i)] = std::fabs(w[std::size_t(r * span + i)]);
    const auto at = a.begin() + clip_rank(policy.clip, span);
    std::nth_element(a.begin(), at, a.end());
    amax[std::size_t(r)] = *at;
  }
  if (per_tensor) std::fill(amax.begin(), amax.end(), amax[0]);
  p.scales.resize(std::size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    // That value maps to the dtype's largest finite one; the scale is an fp32 number.
    const double a = amax[std::size_t(r)];
    p.scales[std::size_t(r)] =
        fp8_no_scale || policy.layerwise || a == 0 ? 1.0f : float(a / dtype_max_finite(p.storage));
  }
#pragma omp parallel for schedule(static) if (int64_t(w.size()) >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < per_row; ++i) {
      const std::size_t at = std::size_t(r * per_row + i);
      const double x = w[at] / double(p.scales[std::size_t(r)]);
      uint32_t bits = encode_narrow(p.storage, x, policy.saturation);
      if (fp8_half_away) bits = round_tie_away(p.storage, x, bits, policy.saturation);
      store_code(p, at, bits);
    }
  return p;
}

}  // namespace

Expected<std::shared_ptr<const PreparedParam>> WeightStore::get(
    const Weights& weights, uint64_t identity, const std::string& key, const LayerPolicy& policy,
    bool matrix, const FaultSet& faults) {
  const DType storage = param_storage(policy, matrix);
  const bool no_scale = dtype_is_fp8(storage) && faults.has(Fault::kFp8NoScale);
  const bool half_away = dtype_is_fp8(storage) && faults.has(Fault::kFp8RoundHalfAway);
  std::string id =
      std::to_string(identity) + "/" + key + "/" + dtype_name(storage) + (matrix ? "/m" : "/v");
  if (dtype_is_fp8(storage))
    id += "/" + std::to_string(int(policy.scale)) + "/" + std::to_string(int(policy.saturation)) +
          "/" + clip_text(policy.clip) + (no_scale ? "/noscale" : "") +
          (policy.layerwise ? "/layerwise" : "") + (half_away ? "/halfaway" : "");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it != entries_.end()) return it->second;
  auto w = weights.find(key);
  if (w == weights.end() && freed_.count(std::to_string(identity) + "/" + key))
    return Error(key + " is needed in " + dtype_name(storage) +
                 " after its fp32 weights were freed once prepared in another dtype (exec's "
                 "compiled path keeps only the prepared weights); run it with `twinpath run`, "
                 "which keeps the checkpoint");
  TP_CHECK(w != weights.end(), "missing weight " + key);
  auto prepared = std::make_shared<const PreparedParam>(
      prepare(w->second, key, policy, matrix, no_scale, half_away));
  entries_.emplace(id, prepared);
  return prepared;
}

void WeightStore::consume(Weights& weights) {
  std::lock_guard<std::mutex> lock(mutex_);
  consumed_.push_back(&weights);
}

void WeightStore::done_with(const Weights& weights, uint64_t identity, const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Weights* w : consumed_)
    if (w == &weights && w->erase(key)) freed_.insert(std::to_string(identity) + "/" + key);
}

int64_t WeightStore::bytes_held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& [id, p] : entries_) n += p->storage_bytes();
  return n;
}

std::size_t WeightStore::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace tp::compiled
