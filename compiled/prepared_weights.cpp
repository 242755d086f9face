#include "compiled/prepared_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness/core/parallel.h"

namespace tp::compiled {

int64_t PreparedParam::storage_bytes() const {
  return int64_t(values.size() * dtype_size(storage) + scales.size() * sizeof(float));
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

// [Cout][Cin][*K] -> [Cout][*K][Cin] (1 to 3 kernel axes): a conv's GEMM rows for
// channels-last patches. Linear weights (rank 2) stay as they are.
template <class T>
void to_channels_last(const T* w, const Shape& s, T* out) {
  const int64_t n = shape_numel(s);
  if (s.size() < 3) {
    std::copy(w, w + n, out);
    return;
  }
  const int64_t co = s[0], ci = s[1], taps = n / (co * ci);
  for (int64_t o = 0; o < co; ++o)
    for (int64_t c = 0; c < ci; ++c)
      for (int64_t t = 0; t < taps; ++t) out[(o * taps + t) * ci + c] = w[(o * ci + c) * taps + t];
}

// f32, f16 or bf16 storage of weights that are floats (f32, f16, bf16 on disk): laid out and
// rounded in float, by the narrow dtype's bits (the same values as round_through:
// DType.FastF32NarrowingMatchesEncodeNarrow), without the f64 copies fp8 scaling needs.
void round_floats(const Tensor& source, bool matrix, PreparedParam& p) {
  Tensor widened;
  if (source.dtype() != DType::kF32) widened = source.to(DType::kF32);
  const float* w = source.dtype() == DType::kF32 ? source.data<float>() : widened.data<float>();
  p.values.resize(std::size_t(source.numel()));
  if (matrix)
    to_channels_last(w, p.shape, p.values.data());
  else
    std::copy(w, w + source.numel(), p.values.begin());
  if (p.storage == DType::kF32) return;
  const bool bf16 = p.storage == DType::kBF16;
  const int64_t n = source.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    float& v = p.values[std::size_t(i)];
    const uint16_t bits = bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    convert_elements(&bits, p.storage, &v, DType::kF32, 1);
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
  if (matrix)
    to_channels_last(f64.data<double>(), p.shape, w.data());
  else
    std::copy(f64.data<double>(), f64.data<double>() + f64.numel(), w.begin());
  p.values.resize(w.size());
  if (!dtype_is_fp8(p.storage)) {
    const int64_t n = int64_t(w.size());
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (int64_t i = 0; i < n; ++i)
      p.values[std::size_t(i)] = float(round_through(p.storage, w[std::size_t(i)]));
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
      p.values[at] = float(decode_narrow(p.storage, bits));
    }
  return p;
}

}  // namespace

std::shared_ptr<const PreparedParam> WeightStore::get(const Weights& weights, uint64_t identity,
                                                      const std::string& key,
                                                      const LayerPolicy& policy, bool matrix,
                                                      const FaultSet& faults) {
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
  TP_CHECK(w != weights.end(), "missing weight " + key);
  auto prepared = std::make_shared<const PreparedParam>(
      prepare(w->second, key, policy, matrix, no_scale, half_away));
  entries_.emplace(id, prepared);
  return prepared;
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
