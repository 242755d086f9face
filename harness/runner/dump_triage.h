// The state and steps of `triage --activations` (activation_triage.cpp reads the dump and places
// it on the graph; activation_verdict.cpp compares each module, finds the origin and concludes).
// Internal to harness/runner.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/safetensors.h"
#include "harness/runner/activation_mapping.h"
#include "harness/runner/activation_triage.h"
#include "harness/runner/tolerance.h"

namespace tp::activations {

// One dumped module call: "[stepK/][callN/]MODULE/(input|output)[.X]".
struct DumpedModule {
  std::string path;
  int call = 0;
  std::optional<Tensor> output;
  std::vector<std::pair<std::string, Tensor>> inputs;  // "0", "1", "temb", ... in file order
};

// A dumped module placed on the graph.
struct Placed {
  std::string key;  // path, or "callN/path"
  std::string path;
  std::vector<int> ops;        // graph op indices, in execution order
  int value = -1;              // the module's output value
  std::vector<int> externals;  // values its ops read from outside it, first read first
  const DumpedModule* dump = nullptr;
  Tensor output;  // the dumped output in the graph's layout
};

// A dump's triage, step by step (triage_activations runs them in order): the dump's header
// and pipeline inputs, the graph, the modules placed on it, the reference, each module's errors,
// the keep list, the origin and the verdict.
struct DumpTriage {
  DumpTriage(std::string path, const Model& m, SafetensorsFile f)
      : dump_path(std::move(path)), model(m), file(std::move(f)) {}

  const std::string dump_path;
  const Model& model;
  SafetensorsFile file;
  ActivationTriage t;
  DType dtype = DType::kF32;
  bool fp8 = false;      // layerwise fp8 casting
  double dtype_max = 0;  // the dump dtype's largest finite value
  NamedTensors pipeline_inputs;
  int64_t dump_elements = 0, dump_bytes = 0;   // the module tensors' (not read yet)
  Graph g;                                     // the one graph the pipeline runs
  std::map<std::string, DumpedModule> dumped;  // by "callN/path" or "path"
  std::vector<Placed> placed, compared;
  std::vector<Shape> shapes;            // every value's, from the reference run
  std::vector<double> reference_max;    // every value's largest finite |x| in the reference
  std::map<int, Tensor> reference;      // values of dumped modules
  std::map<int, Tensor> dumped_values;  // in the graph's layout, by value id
  std::vector<std::pair<double, std::string>> ranked;  // local error over tolerance, by module
  const Placed* origin = nullptr;
  std::map<int, Tensor> origin_local;  // the origin's ops in fp32 on its dumped inputs

  std::string field(const char* k) const;
  // The metadata: format, pipeline, dtype, the model's class.
  Status read_header();
  // The dump's config against the model folder's.
  Status check_config();
  // The dump's weight fingerprint against the model's.
  Status check_weights();
  Status read_pipeline_inputs();
  Status choose_graph(int64_t memory_budget);
  Status read_modules();
  void place_modules();
  Status run_reference();
  void fit_modules();
  // Graph ops no compared module covers.
  void list_missing();
  // The heaviest op class inside module `p`, and each op's value path (dtypes, reduction).
  OpClass module_paths(const Placed& p, std::vector<ValuePath>& paths) const;
  // Module `p`'s inputs as dumped (the reference's where the dump lacks one).
  std::map<int, Tensor> module_inputs(const Placed& p, bool& finite, bool& dumped_all) const;
  Status compare_modules();
  void list_keep_fp32();
  // The origin: its first non-finite element, the op inside it, and why; without one, a
  // non-finite pipeline input.
  void describe_origin();
  // The op inside the origin module: the first whose fp32 value on the dumped inputs leaves the
  // dtype's range (its value in `value`); null when none does.
  const Op* first_op_past_range(const Placed& p, double& value) const;
  // The first op inside `p` whose dumped value (a submodule's) is non-finite, or null.
  const Op* first_dumped_non_finite(const Placed& p) const;
  // The op, the cause and the detail of the origin `p`; the op goes first in the keep list.
  void name_origin_op(const Placed& p, Provenance& pv);
  void conclude();
};

}  // namespace tp::activations
