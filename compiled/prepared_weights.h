// Weights as the compiled path holds them: stored in the policy's weight dtype (fp8 with fp32
// scales chosen from the fp32 weights), conv weights reordered for channels-last
// ([Cout][ky][kx][Cin]). Conv and linear weights in f16, bf16 or fp8 are held as their codes and
// decoded where a kernel reads them (decoding is exact); everything else is held decoded.
// One WeightStore serves every plan of a session, so plans over the same weights (encoder and
// decoder, two pipelines sharing a VAE) hold each prepared tensor once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiled/faults.h"
#include "compiled/policy.h"
#include "harness/core/checkpoint.h"
#include "harness/core/sgemm.h"

namespace tp::compiled {

// Leaves new elements uninitialized: a prepared tensor is written once, in parallel, and that
// first write is where each page is touched (a zero fill first would touch all of them on one
// thread).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

struct PreparedParam {
  std::string key;
  DType storage = DType::kF32;
  Shape shape;  // as in the checkpoint
  // Decoded stored values, unscaled; conv weights [Cout][*K][Cin]. Empty for a conv's or
  // linear's weight stored in f16, bf16 or fp8: it is held as `codes` alone (what the policy
  // stores, 1 or 2 bytes an element), and a kernel reads it through ParamFloats.
  std::vector<float, UninitializedAllocator<float>> values;
  // Those weights' codes, dtype_size(storage) bytes each, in the same layout.
  std::vector<uint8_t, UninitializedAllocator<uint8_t>> codes;
  std::vector<float> scales;  // fp8: per output channel (per-tensor repeats one value); else empty
  int64_t count() const;      // elements
  int64_t storage_bytes() const;
};

// A parameter's decoded values for as long as a kernel reads them: its `values`, or its codes
// decoded (exactly: every f16, bf16 and fp8 value is a float) into a buffer of this thread's,
// reused from call to call, so a step decodes each narrow weight where it runs instead of the
// session holding an fp32 copy of every one.
class ParamFloats {
 public:
  explicit ParamFloats(const PreparedParam& p);
  ~ParamFloats();
  ParamFloats(const ParamFloats&) = delete;
  ParamFloats& operator=(const ParamFloats&) = delete;
  const float* data() const { return data_; }
  const float* begin() const { return data_; }
  const float* end() const { return data_ + count_; }

 private:
  const float* data_ = nullptr;
  int64_t count_ = 0;
  bool decoded_ = false;
};

// A [rows][K] weight (a linear's) as sgemm's B for x W^T: its values, or its codes decoded a
// panel at a time as the product packs them (no fp32 copy of the weight). `w` must outlive it.
sgemm::PackB weight_rows_packer(const PreparedParam& w);

// Decodes n codes of dtype `dt` (f16, bf16 or an fp8) to floats, exactly.
void decode_codes(DType dt, const uint8_t* codes, float* out, int64_t n);
// Encodes n floats as f16 or bf16 codes: the bits f32_to_f16_bits and f32_to_bf16_bits give.
void encode_codes(DType dt, const float* in, uint8_t* out, int64_t n);

// A content hash of every tensor (key, dtype, shape, bytes): the weights' identity in plan keys
// and plan files.
uint64_t weights_identity(const Weights& weights);

class WeightStore {
 public:
  // The parameter `key` stored as `storage` (fp8: with scale granularity and saturation from
  // `policy`). `matrix` marks conv/linear weights, the only ones stored in fp8 with a scale
  // (cast=layerwise stores the layer's bias in fp8 too, and neither has a scale).
  // A parameter a plan needs that `weights` no longer holds (consumed below) is an error.
  Expected<std::shared_ptr<const PreparedParam>> get(const Weights& weights, uint64_t identity,
                                                     const std::string& key,
                                                     const LayerPolicy& policy, bool matrix,
                                                     const FaultSet& faults);
  int64_t bytes_held() const;  // storage bytes of every distinct prepared tensor
  std::size_t count() const;

  // Lets the store free `weights`' tensors as it prepares them: once a plan has every use of a
  // parameter prepared (done_with), its source tensor is erased from `weights`. For a caller that
  // runs nothing but this store's plans over them (exec's compiled path), so the fp32 checkpoint
  // and the prepared weights are never held whole at once. `weights` must outlive the store's use.
  void consume(Weights& weights);
  // The plan being prepared has no further use of `key`: frees it if its weights are consumed.
  void done_with(const Weights& weights, uint64_t identity, const std::string& key);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const PreparedParam>> entries_;
  std::vector<Weights*> consumed_;
  std::set<std::string> freed_;  // "identity/key" of the tensors consume has erased
};

// The storage dtype a parameter gets under a layer policy.
DType param_storage(const LayerPolicy& policy, bool matrix);

}  // namespace tp::compiled
