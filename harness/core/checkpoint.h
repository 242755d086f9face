// Loading a model's weights from a diffusers checkpoint and matching them to the graph.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/core/graph.h"
#include "harness/core/safetensors.h"

namespace tp {

// Weights by diffusers state-dict key, in the dtype the file stores them.
using Weights = std::map<std::string, Tensor>;

// Reads `path`, renames legacy attention keys (query/key/value/proj_attn -> to_q/to_k/to_v/
// to_out.0), squeezes [C,C,1,1] attention weights to [C,C], and checks the result against
// `specs`. A mismatch is refused with one message listing every missing, unexpected and
// wrongly shaped tensor.
Expected<Weights> load_checkpoint(const std::string& path, const std::vector<ParamSpec>& specs);

// The same over a sharded checkpoint: the safetensors files a diffusers index file
// (`diffusion_pytorch_model.safetensors.index.json`: {"weight_map": {key: shard file}}) names,
// beside it. Every shard must exist in the index's folder and hold the keys the index gives it;
// the tensors of all shards together are checked against `specs` as one file's would be.
Expected<Weights> load_sharded_checkpoint(const std::string& index_path,
                                          const std::vector<ParamSpec>& specs);

// The legacy-name rewrite alone (exposed for tests): returns the modern key.
std::string modern_attention_key(const std::string& key);

}  // namespace tp
