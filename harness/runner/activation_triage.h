// `twinpath triage --activations DUMP --model DIR`: the activations a user's own stack produced
// at each module (tools/dump_activations.py: diffusers in fp16, under layerwise fp8 casting,
// torch.compile, a custom kernel library) against the fp32 reference, module by module.
//
// Each dumped module output maps onto the graph by its diffusers path: a leaf module is the op of
// that name, a composite one the last op under its path (ResnetBlock2D's one `nonlinearity`,
// called twice, is act1 then act2); a module's inputs are the values its ops read from outside
// it. Per module: the accumulated error (its dumped output against the reference run on the
// dump's pipeline inputs) and the local error (against its own ops run in fp32 on its dumped
// inputs, weights rounded as the user's stack stores them). The origin is the first module, in
// execution order, whose output is non-finite while its inputs were finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/models/model.h"
#include "reports/result.h"

namespace tp {

struct ActivationTriage {
  CaseResult result;  // outcome, provenance (origin), one checkpoint per compared module,
                      // keep_fp32
  std::string pipeline, dtype, layerwise_fp8;
  int compared = 0;                         // modules compared with the reference
  std::vector<std::string> missing;         // graph modules with no dumped output
  std::vector<std::string> unknown;         // dumped modules the graph does not have (with why)
  std::vector<std::string> identity;        // dumped modules that compute nothing (Dropout in eval)
  std::vector<std::string> over_tolerance;  // "MODULE (N x tol)", worst first
  std::vector<std::string> clipped;  // layerwise fp8: weights past e4m3's 448 ("KEY (max |w| X)")
  std::vector<std::string> notes;    // later steps not compared, inputs taken from the reference
  int64_t estimated_bytes = 0;       // the memory estimate the triage was held to
};

// Reads DUMP (metadata format "twinpath-activations 1") and triages it against `model`. Before
// reading any module's tensors, refuses a dump whose triage would need more memory than
// `memory_budget` (0: the machine's available memory less a margin; harness/runner/
// memory_budget.h).
Expected<ActivationTriage> triage_activations(const std::string& dump_path, const Model& model,
                                              int64_t memory_budget = 0);

}  // namespace tp
