// What running one case produces: the verdict, per-checkpoint metrics (accumulated and local),
// NaN provenance and the precision-search answer. Reports serialize exactly this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/compare.h"
#include "harness/core/contract.h"
#include "harness/core/safetensors.h"

namespace tp {

enum class Outcome : uint8_t { kPassed, kFailed, kMistrusted, kSkipped, kUnsupported, kError };
const char* outcome_name(Outcome o);
bool parse_outcome(const std::string& name, Outcome& out);

struct CheckpointRecord {
  std::string name;  // diffusers module path (or op name), or "output:<name>" for a pipeline output
  std::string graph;     // "vae.decoder"
  int group = -1;        // index in the plan (-1 for pipeline outputs)
  std::string op_class;  // conv, group_norm, ... output
  std::string dtype;     // the compiled side's storage dtype
  Metrics accumulated;   // the full compiled run against the reference
  bool has_local = false;
  Metrics local;  // this group alone on the reference's inputs
  double tolerance_rel_l2 = 0, tolerance_max_element = 0;
  std::string tolerance_basis;
  ContractMetrics contract;  // the stored value against the numerics contract
  bool passed = true;
};

struct Provenance {
  bool found = false;
  std::string checkpoint;  // the origin group's checkpoint
  std::string graph;
  std::string step;  // the graph call in a denoising loop ("step3"; "" for a single call)
  int group = -1;
  std::string layer;  // the op's name (a diffusers path)
  std::string op;     // op kind: conv2d, group_norm, ...
  // Where the fused group stored the value when that is a later op than the origin (the
  // residual `add` after a conv that left the range); empty when the origin stored it.
  std::string stored_layer, stored_op;
  std::string cause;           // overflow, inf-inf, 0*inf, propagated-from-input, fault,
                               // non-finite-weight
  std::string detail;          // one sentence
  std::vector<int64_t> index;  // NCHW element of the op's output
  double value = 0;  // the compiled value there (fp32 before the store, or the stored value)
  double reference_value = 0;    // the reference's value of the same op output there
  double reference_max_abs = 0;  // max |reference| over the op's output
  double dtype_max =
      0;  // largest finite value of the dtype that overflowed (0 when not an overflow)
  std::vector<std::pair<std::string, double>>
      inputs;  // the op's input values at (or feeding) the element
};

// One resolution of a stream= case, in the compiled session it shares with the others.
struct StreamStep {
  std::string resolution;               // "64x80" (image pixels)
  std::string input_shape;              // the pipeline input, NCHW
  int64_t compilations = 0;             // plans compiled for this step (0: served from the cache)
  int64_t total_compilations = 0;       // in the session so far
  double compile_seconds = 0;           // this step's
  int64_t arena_bytes = 0;              // arenas held after the step, every plan together
  int64_t peak_arena_bytes = 0;         // the session's peak so far
  int64_t evictions = 0;                // idle arenas released so far to stay within the limit
  int64_t need_bytes = 0;               // the arenas this step's plans need together
  bool refused = false;                 // refused before allocating (mem= too small for it)
  int64_t exact_compilations = 0;       // under bucket:N, the exact-shape session's count so far
  double bucket_vs_exact_max_abs = -1;  // under bucket:N, |bucketed - exact| max (-1: not compared)
  std::string note;                     // the refusal, or what differed
  std::string compiled_graphs;          // plans compiled for this step per graph ("unet 1, ...")
};

// Plan-level facts a baseline keeps, so a change in them is seen even when outputs agree.
struct PlanSummary {
  std::string graph;  // graph name and capacity shape: "vae.decoder [1, 4, 16, 16]"
  int64_t groups = 0;
  int64_t arena_bytes = 0;
  int64_t rounding_points = 0;  // rows of its numerics contract
};

struct CaseResult {
  std::string id;       // the canonical case line
  int64_t ordinal = 0;  // position in the whole (unsharded) list of cases: merged shards sort by it
  uint64_t seed = 0;
  Outcome outcome = Outcome::kError;
  std::string reason;  // one sentence
  std::string repro;   // for every non-passing case
  std::string device;  // where the compiled path ran
  double reference_seconds = 0, compiled_seconds = 0;
  // The process's peak resident memory while the case ran (models cached by earlier cases
  // included), where cases run one at a time; 0 where not measured.
  int64_t peak_rss_bytes = 0;
  std::string plan_stats;                     // describe_session
  std::vector<CheckpointRecord> checkpoints;  // execution order, pipeline outputs last
  Provenance provenance;
  bool searched = false;
  std::vector<std::string>
      keep_fp32;  // the precision search's answer (empty: not found / not needed)
  std::string search_note;
  int search_runs = 0;
  std::string repro_file;  // the origin group's minimal repro (triage), for `twinpath replay`
  NamedTensors dumps;      // "<checkpoint>/compiled", "<checkpoint>/reference" (with --dump)
  std::vector<StreamStep> stream;     // stream= cases, one per resolution
  std::vector<ContractRow> contract;  // every plan's rounding points, group by group
  std::vector<PlanSummary> plans;     // the compiled session's plans, in compile order
  bool degenerate_reference = false;  // a reference output constant or non-finite (Evaluation)
  // A drawn config's input search (case_runner.h): the scaling it took, or that none helped; empty
  // where the standard input's reference output was neither constant nor non-finite.
  std::string input_search;
};

}  // namespace tp
