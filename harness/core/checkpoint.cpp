#include "harness/core/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/core/untrusted_json.h"

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

namespace {

// The tensors of `files` (one checkpoint, possibly sharded) matched to `specs`; `what` names the
// checkpoint in the error.
Expected<Weights> match_checkpoint(const std::vector<SafetensorsFile>& files,
                                   const std::vector<ParamSpec>& specs, const std::string& what) {
  std::map<std::string, const ParamSpec*> expected;
  for (const ParamSpec& s : specs) expected[s.key] = &s;

  Weights weights;
  std::vector<std::string> unexpected, wrong_shape;
  std::set<std::string> present;  // keys the file has, in any shape
  for (const SafetensorsFile& file : files)
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
      weights.emplace(key, std::move(t).reshaped(shape));
    }
  std::vector<std::string> missing;
  for (const ParamSpec& s : specs)
    if (!present.count(s.key)) missing.push_back(s.key + " " + shape_string(s.shape));
  if (!missing.empty() || !unexpected.empty() || !wrong_shape.empty()) {
    return Error(what + ": the checkpoint does not match config.json" +
                 summarize("missing", missing) + summarize("unexpected", unexpected) +
                 summarize("with the wrong shape", wrong_shape) +
                 "\n  Check that config.json belongs to this checkpoint (same block_out_channels, "
                 "layers_per_block, latent_channels, quant convs).");
  }
  return weights;
}

// A shard's file name from an index: a plain name in the index's own folder.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.size() < 256;
}

}  // namespace

Expected<Weights> load_checkpoint(const std::string& path, const std::vector<ParamSpec>& specs) {
  TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  std::vector<SafetensorsFile> files;
  files.push_back(std::move(file));
  return match_checkpoint(files, specs, path);
}

Expected<Weights> load_sharded_checkpoint(const std::string& index_path,
                                          const std::vector<ParamSpec>& specs) {
  std::ifstream in(index_path);
  if (!in) return Error(index_path + ": cannot open the checkpoint's index file");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto fix = "; restore the index file the checkpoint came with";
  auto parsed = parse_untrusted_json(text, index_path);
  if (!parsed.ok()) return Error(parsed.error().message() + fix);
  const nlohmann::json& index = *parsed;
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return Error(index_path + ": not a safetensors index (a JSON object with a \"weight_map\")" +
                 fix);
  std::map<std::string, std::vector<std::string>> keys_of;  // shard file -> keys the index gives it
  for (const auto& [key, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || !plain_file_name(shard.get<std::string>()))
      return Error(index_path + ": the weight map gives " + key +
                   " a shard that is not a file name beside the index" + fix);
    keys_of[shard.get<std::string>()].push_back(key);
  }
  if (keys_of.empty()) return Error(index_path + ": the weight map names no shard" + fix);
  const std::filesystem::path folder = std::filesystem::path(index_path).parent_path();
  std::vector<SafetensorsFile> files;
  for (const auto& [shard, keys] : keys_of) {
    const std::string path = (folder / shard).string();
    if (!std::filesystem::is_regular_file(path))
      return Error(index_path + " names the shard " + shard + ", which is not in " +
                   folder.string() + "; download every shard of the checkpoint");
    TP_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
    for (const std::string& key : keys)
      if (!file.find(key))
        return Error(index_path + " puts " + key + " in " + shard + ", which does not hold it" +
                     fix);
    files.push_back(std::move(file));
  }
  return match_checkpoint(files, specs,
                          folder.string() + " (" + std::to_string(files.size()) + " shards)");
}

}  // namespace tp
