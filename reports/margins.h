// How near each checkpoint came to its tolerance: the number a reviewer reads first in a passing
// run (`report show`, `run --json`), and every checkpoint's with `report show --layers`.
#pragma once

#include <optional>
#include <string>

#include "reports/result.h"

namespace tp {

// One checkpoint's judged error against its tolerance. The judged error is the one the verdict
// used: the group alone on the reference's inputs (local) where it ran alone, else the
// accumulated error (pipeline outputs); of rel L2 and the worst element (relative to max|ref|),
// the measure nearer its bound.
struct CheckpointMargin {
  const CheckpointRecord* checkpoint = nullptr;
  bool local = false;
  std::string measure;  // "rel L2" | "max element"
  double error = 0, tolerance = 0;
  double margin = 0;  // tolerance / error: the factor the error may still grow by (0: past it or
                      // non-finite; inf: no error)
};

// Empty for a checkpoint without a tolerance (one whose comparison itself failed).
std::optional<CheckpointMargin> checkpoint_margin(const CheckpointRecord& record);
// The case's checkpoint with the smallest margin (the first of equals); empty when none has one.
std::optional<CheckpointMargin> worst_checkpoint(const CaseResult& result);
// "decoder.mid_block.resnets.0 (local): rel L2 1.2e-03, tolerance 4.0e-03, margin x3.3"
std::string margin_text(const CheckpointMargin& m);
// Every checkpoint of the case, one line each, in execution order (`report show --layers`).
std::string margin_table(const CaseResult& result);

}  // namespace tp
