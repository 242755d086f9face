// A path that executes graphs of the core IR: what a model family's pipelines run on. The
// reference, the torch path and the compiled session each implement it, so a family writes its
// pipelines once and every path runs them.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "harness/core/checkpoint.h"
#include "harness/core/safetensors.h"

namespace tp {

// One tiled stage's decision: whether it tiled, and the grid it used.
struct TilingDecision {
  bool decode = false;
  Shape input;
  bool engaged = false;
  int64_t rows = 0, cols = 0;
  int64_t tile = 0, stride = 0;  // latents (decode) or pixels (encode)
  int64_t threshold = 0;         // the size the input must exceed to tile (KL)
  // Tiling in time (a video VAE's framewise pass): whether it ran, its tile count, and the
  // frames (latent frames for a decode) the input must exceed for it.
  bool framewise = false;
  int64_t frame_tiles = 0, frame_threshold = 0;
  std::string text() const;
};

class GraphExecutor {
 public:
  virtual ~GraphExecutor() = default;

  // Runs one graph with the model's weights on named inputs.
  virtual Expected<NamedTensors> run(const Graph& graph, const Weights& weights,
                                     const NamedTensors& inputs) = 0;

  // Runs `first`, then `second` on `first`'s output `handoff`; returns the second graph's
  // outputs, then the first's (an executor that keeps both live reads the first's after the
  // second ran, as a caller holding them would). This default runs them one after the other.
  virtual Expected<NamedTensors> run_chained(const Graph& first, const Graph& second,
                                             const Weights& weights, const NamedTensors& inputs,
                                             const std::string& handoff);

  // Whether tiled pipelines run through the family's streamed tiler (bounded memory, blends
  // rounded to the activation dtype: the compiled path) or its plain one (the reference paths).
  // Two implementations of the same semantics, so a wrong threshold or blend in either shows.
  virtual bool streams_tiles() const { return false; }
  // Records a tiling decision (for statistics and reports); executors without them ignore it.
  virtual void record_tiling(const TilingDecision&) {}
  // A deliberate fault by name (`twinpath exec --help` lists them) that pipeline code outside
  // the executor must inject for it: tile-threshold-from-stride lives in the streamed tiler.
  virtual bool injects(std::string_view /*fault*/) const { return false; }
  // The part of a pipeline the following calls belong to ("refiner/": the refiner's loop after
  // the base's; "" again after it), for executors that name calls (the runner's capture).
  virtual void set_part(const std::string& /*prefix*/) {}
};

// A path given as one function (the reference and torch paths, LibTorch peers).
using GraphRunner = std::function<Expected<NamedTensors>(const Graph& graph, const Weights& weights,
                                                         const NamedTensors& inputs)>;

class FunctionExecutor : public GraphExecutor {
 public:
  explicit FunctionExecutor(GraphRunner run) : run_(std::move(run)) {}
  Expected<NamedTensors> run(const Graph& graph, const Weights& weights,
                             const NamedTensors& inputs) override {
    return run_(graph, weights, inputs);
  }

 private:
  GraphRunner run_;
};

}  // namespace tp
