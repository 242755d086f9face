// Fuzz target: an activation dump (tools/dump_activations.py's safetensors: metadata, config and
// weight fingerprint JSON, module tensors by name) triaged against the model the committed
// dumps were made from (tests/fixtures/activations/kl-small.json, seed 3, as cli_test's), with
// a 64 MiB memory budget so that a dump claiming huge tensors is refused, not allocated. Its
// seeds are those dumps (tests/fixtures/activations/).
#include <unistd.h>

#include <filesystem>
#include <string>

#include "harness/models/model.h"
#include "harness/runner/activation_triage.h"
#include "harness/runner/case_runner.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// The model folder, written once per process and removed at its exit.
struct ModelFolder {
  std::string dir = std::filesystem::temp_directory_path().string() + "/twinpath-fuzz-model-" +
                    std::to_string(::getpid());
  ~ModelFolder() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const tp::Model& dumps_model() {
  static const ModelFolder folder;
  static const std::shared_ptr<const tp::Model> model = [] {
    const std::string config =
        std::string(TWINPATH_SOURCE_DIR) + "/tests/fixtures/activations/kl-small.json";
    if (!tp::init_model(config, 3, folder.dir, "").ok()) __builtin_trap();
    tp::ModelCache models;
    auto m = models.get(folder.dir);
    if (!m.ok()) __builtin_trap();
    return *m;
  }();
  return *model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const tp::Model& model = dumps_model();
  (void)tp::triage_activations(tp::fuzz::input_file(data, size, ".safetensors"), model,
                               int64_t{64} << 20);
  return 0;
}
