#include "harness/core/checkpoint.h"

#include <cstring>
#include <set>

namespace tp {

std::string modern_attention_key(const std::string& key) {
  // diffusers ModelMixin._fix_state_dict_keys_on_load for _from_deprecated_attn_block modules.
  static const std::pair<const char*, const char*> kRenames[] = {{".query.", ".to_q."},
                                                                 {".key.", ".to_k."},
                                                                 {".value.", ".to_v."},
                                                                 {".proj_attn.", ".to_out.0."}};
  if (key.find(".attentions.") == std::string::npos) return key;
  for (const auto& [from, to] : kRenames) {
    const std::size_t at = key.rfind(from);
    if (at != std::string::npos) return key.substr(0, at) + to + key.substr(at + std::strlen(from));
  }
  return key;
}

namespace {

std::string summarize(const std::string& title, const std::vector<std::string>& items) {
  if (items.empty()) return "";
  constexpr std::size_t kShown = 8;
  std::string s = "\n  " + std::to_string(items.size()) + " " + title + ":";
  for (std::size_t i = 0; i < items.size() && i < kShown; ++i) s += "\n    " + items[i];
  if (items.size() > kShown)
    s += "\n    ... and " + std::to_string(items.size() - kShown) + " more";
  return s;
}

}  // namespace

Expected<Weights> load_checkpoint(const std::string& path, const std::vector<ParamSpec>& specs) {
  TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  std::map<std::string, const ParamSpec*> expected;
  for (const ParamSpec& s : specs) expected[s.key] = &s;

  Weights weights;
  std::vector<std::string> unexpected, wrong_shape;
  std::set<std::string> present;  // keys the file has, in any shape
  for (const SafetensorsEntry& e : file.entries()) {
    const std::string key = modern_attention_key(e.name);
    auto it = expected.find(key);
    if (it == expected.end()) {
      unexpected.push_back(e.name + " " + shape_string(e.shape));
      continue;
    }
    present.insert(key);
    Shape shape = e.shape;
    const Shape& want = it->second->shape;
    // Linear weights saved from the old conv-style attention block are [C,C,1,1].
    if (want.size() == 2 && shape.size() == 4 && shape[2] == 1 && shape[3] == 1) shape.resize(2);
    if (shape != want) {
      wrong_shape.push_back(e.name + ": file has " + shape_string(e.shape) + ", config needs " +
                            shape_string(want));
      continue;
    }
    if (weights.count(key)) {
      unexpected.push_back(e.name + " (a second copy of " + key + ")");
      continue;
    }
    TP_ASSIGN_OR_RETURN(Tensor t, file.read(e));
    weights.emplace(key, t.reshaped(shape));
  }
  std::vector<std::string> missing;
  for (const ParamSpec& s : specs)
    if (!present.count(s.key)) missing.push_back(s.key + " " + shape_string(s.shape));
  if (!missing.empty() || !unexpected.empty() || !wrong_shape.empty()) {
    return Error(path + ": the checkpoint does not match config.json" +
                 summarize("missing", missing) + summarize("unexpected", unexpected) +
                 summarize("with the wrong shape", wrong_shape) +
                 "\n  Check that config.json belongs to this checkpoint (same block_out_channels, "
                 "layers_per_block, latent_channels, quant convs).");
  }
  return weights;
}

}  // namespace tp
