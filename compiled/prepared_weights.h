// Weights as the compiled path holds them: stored in the policy's weight dtype (fp8 with fp32
// scales chosen from the fp32 weights), kept decoded to fp32 for the emulated kernels (decoding
// is exact), conv weights reordered for channels-last ([Cout][ky][kx][Cin]).
// One WeightStore serves every plan of a session, so plans over the same weights (encoder and
// decoder, two pipelines sharing a VAE) hold each prepared tensor once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiled/faults.h"
#include "compiled/policy.h"
#include "harness/core/checkpoint.h"

namespace tp::compiled {

struct PreparedParam {
  std::string key;
  DType storage = DType::kF32;
  Shape shape;                // as in the checkpoint
  std::vector<float> values;  // decoded stored values, unscaled; conv weights [Cout][*K][Cin]
  std::vector<float> scales;  // fp8: per output channel (per-tensor repeats one value); else empty
  int64_t storage_bytes() const;
};

// A content hash of every tensor (key, dtype, shape, bytes): the weights' identity in plan keys
// and plan files.
uint64_t weights_identity(const Weights& weights);

class WeightStore {
 public:
  // The parameter `key` stored as `storage` (fp8: with scale granularity and saturation from
  // `policy`). `matrix` marks conv/linear weights, the only ones stored in fp8 with a scale
  // (cast=layerwise stores the layer's bias in fp8 too, and neither has a scale).
  std::shared_ptr<const PreparedParam> get(const Weights& weights, uint64_t identity,
                                           const std::string& key, const LayerPolicy& policy,
                                           bool matrix, const FaultSet& faults);
  int64_t bytes_held() const;  // storage bytes of every distinct prepared tensor
  std::size_t count() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const PreparedParam>> entries_;
};

// The storage dtype a parameter gets under a layer policy.
DType param_storage(const LayerPolicy& policy, bool matrix);

}  // namespace tp::compiled
