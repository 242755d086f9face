#include "harness/runner/memory_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "harness/core/format.h"
#include "harness/core/memory.h"
#include "harness/core/shapes.h"
#include "harness/runner/shape_executor.h"

namespace tp {
namespace {

// The measured factors (docs/design.md, "Memory budget"): the values a run captures per byte of
// every value its graph calls make, counted once for the reference and once for the compiled
// run (in the activation dtype) and again per extra compiled run of an isolation check; and
// the live values of the largest call for the executors' working sets.
constexpr double kCapturedPerValue = 1.0;
constexpr double kWorkingPerLive = 2.0;
// The process itself: code, LibTorch's and HDF5's libraries, allocator arenas (measured: a run
// refused before its inputs peaked at 387 MB, a 64x64 tiny-kl decode at 443 MB).
constexpr int64_t kProcessBytes = int64_t(416) << 20;
// The contract check's fp64 LibTorch run of a group: the conv's patch matrix twice (the values
// and the bound's |w|.|x| product) and the group's live values twice (value and bound).
constexpr double kContractColumns = 2, kContractLive = 2;
// The primary input's size along its last two axes for the recording run.
constexpr int64_t kRecordSize = 64;

struct Call {
  Graph graph;
  std::map<std::string, Shape> inputs;
};

int64_t weight_bytes(const Model* m) {
  int64_t n = 0;
  if (m)
    for (const auto& [key, t] : m->weights) n += int64_t(t.nbytes());
  return n;
}

// `columns`: the largest conv's patch matrix (fan-in x output positions), in elements, which
// LibTorch's CPU convolution materializes (the contract check runs each group on it in fp64).
struct CallBytes {
  int64_t values = 0, live = 0, columns = 0;
};
// Every value of one call together, and the most alive at once while its ops run (in order,
// each value freed after its last use), in fp32 bytes.
Expected<CallBytes> call_bytes(const Call& call) {
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes, infer_value_shapes(call.graph, call.inputs));
  auto bytes = [&](int v) {
    return shapes[std::size_t(v)].empty() ? 0 : 4 * shape_numel(shapes[std::size_t(v)]);
  };
  CallBytes b;
  std::vector<bool> kept(shapes.size(), false);
  for (const auto& [name, id] : call.graph.outputs) kept[std::size_t(id)] = true;
  int64_t live = 0;
  for (const auto& [name, id] : call.graph.inputs) live += bytes(id);
  b.values = live;
  const std::vector<int> last = call.graph.last_uses();
  for (std::size_t i = 0; i < call.graph.ops.size(); ++i) {
    const Op& op = call.graph.ops[i];
    live += bytes(op.output);
    b.values += bytes(op.output);
    if (op.kind == OpKind::kConv && !op.weight.empty())
      for (const ParamSpec& w : call.graph.params)
        if (w.key == op.weight && !shapes[std::size_t(op.output)].empty())
          b.columns =
              std::max(b.columns, shape_numel(w.shape) / w.shape[0] *
                                      shape_numel(shapes[std::size_t(op.output)]) / w.shape[0]);
    b.live = std::max(b.live, live);
    for (int v : op.inputs)
      if (last[std::size_t(v)] == int(i) && !kept[std::size_t(v)]) live -= bytes(v);
  }
  return b;
}

}  // namespace

std::string MemoryEstimate::text() const {
  return format_bytes(bytes) + " (the process " + format_bytes(bytes - weights - held - working) +
         ", weights " + format_bytes(weights) + ", captured values " + format_bytes(held) +
         ", working sets " + format_bytes(working) + ")";
}

Expected<MemoryEstimate> estimate_case_memory(const PreparedCase& p, bool contract) {
  const Model& m = *p.model;
  const Family& family = m.family();
  TP_ASSIGN_OR_RETURN(
      Shape full, family.input_shape(*m.config, p.pipeline, p.c.height, p.c.width, p.c.options));
  const int64_t scale = family.input_scale(*m.config, p.pipeline);
  const int64_t rh = std::min(full.end()[-2], kRecordSize),
                rw = std::min(full.end()[-1], kRecordSize);
  InputRequest r;
  r.pipeline = p.pipeline;
  r.height = rh * scale;
  r.width = rw * scale;
  r.seed = p.c.seed();
  r.options = p.c.options;
  const GraphRunner none = [](const Graph& g, const Weights&,
                              const NamedTensors&) -> Expected<NamedTensors> {
    return Error("the memory estimate runs no graph (" + g.name + ")");
  };
  TP_ASSIGN_OR_RETURN(NamedTensors small, family.generate_inputs(m, r, none));
  TP_ASSIGN_OR_RETURN(small, family.bind_inputs(m, p.pipeline, small));
  const Shape recorded = small.front().second.shape();
  std::vector<Call> calls;
  ShapeExecutor recorder(
      [&calls](const Graph& graph, const Weights&, const std::map<std::string, Shape>& inputs) {
        calls.push_back({graph, inputs});
        return Status();
      });
  PipelineOptions options = p.options();
  options.tiling.enabled = false;
  if (auto ran = run_model(m, p.pipeline, small, recorder, options); !ran.ok()) return ran.error();

  // Each call at the case's size: spatial axes (the last two of an image's or a video's
  // [B, C, (T,) H, W] input) scaled as the primary input's.
  const double sh = double(full.end()[-2]) / double(recorded.end()[-2]),
               sw = double(full.end()[-1]) / double(recorded.end()[-1]);
  // Tiled, the compiled path runs one tile at a time: its working values scale down to a tile's
  // share; what it captures is every tile's (the tiles cover each pixel up to `coverage` times),
  // or nothing when the case runs without capturing its tiles.
  const double tile_share =
      p.tiling.enabled ? family.tile_share(*m.config, p.tiling, p.c.height, p.c.width) : 1.0;
  const double held_share = !p.tiling.enabled ? 1.0
                            : p.capture_tiles
                                ? family.tile_coverage(*m.config, p.tiling, p.c.height, p.c.width)
                                : tile_share;
  int64_t values = 0, live = 0, io = 0, columns = 0;
  for (Call& call : calls) {
    for (auto& [name, shape] : call.inputs)
      if (shape.size() >= 4) {
        int64_t &h = shape.end()[-2], &w = shape.end()[-1];
        h = std::max<int64_t>(1, std::llround(double(h) * sh));
        w = std::max<int64_t>(1, std::llround(double(w) * sw));
      }
    TP_ASSIGN_OR_RETURN(CallBytes b, call_bytes(call));
    values += int64_t(double(b.values) * held_share);
    live = std::max(live, b.live);
    columns = std::max(columns, int64_t(double(b.columns) * tile_share));
    for (const auto& [name, shape] : call.inputs) io = std::max(io, 4 * shape_numel(shape));
  }
  const double ref = p.reference == DType::kF64 ? 8 : 4;  // bytes per element
  const double act = double(dtype_size(p.c.policy.activation));
  // Extra compiled runs held beside the first: a chained pipeline's isolated first and second
  // graphs, a warm= case's isolated run.
  const int extra_runs = (p.descriptor().handoff ? 1 : 0) + (p.warm ? 1 : 0);

  MemoryEstimate e;
  for (const Model* model : p.models()) e.weights += weight_bytes(model);
  e.weights += weight_bytes(p.warm.get());
  // The compiled path's prepared copies, in the weight dtype.
  e.weights += e.weights / 4 * int64_t(dtype_size(p.c.policy.weight));
  const double elements = double(values) / 4, live_elements = double(live) / 4;
  e.held = int64_t(kCapturedPerValue * elements * (ref + act * (1 + extra_runs)));
  // A tiled run's reference is the untiled pipeline (seams are measured against it), the
  // compiled run goes tile by tile.
  e.working = int64_t(kWorkingPerLive * live_elements * (ref + act * tile_share)) + 4 * io;
  if (contract && p.captures_groups())  // a tiled run not captured has no groups to check
    e.working += int64_t(8 * (kContractColumns * double(columns) + kContractLive * live_elements));
  e.bytes = kProcessBytes + e.weights + e.held + e.working;
  if (std::getenv("TWINPATH_MEMORY_DEBUG"))
    std::fprintf(stderr, "memory: columns %lld values %lld live %lld io %lld calls %zu -> %s\n",
                 static_cast<long long>(columns), static_cast<long long>(values),
                 static_cast<long long>(live), static_cast<long long>(io), calls.size(),
                 e.text().c_str());
  return e;
}

Expected<MemoryEstimate> estimate_dump_memory(const Graph& graph,
                                              const std::map<std::string, Shape>& inputs,
                                              int64_t dump_elements, int64_t dump_bytes,
                                              const Model& model) {
  TP_ASSIGN_OR_RETURN(CallBytes call, call_bytes({graph, inputs}));
  MemoryEstimate e;
  e.weights = 2 * weight_bytes(&model);
  e.held = dump_bytes + 4 * dump_elements + int64_t(kCapturedPerValue * double(call.values));
  e.working = int64_t(kWorkingPerLive * double(call.live));
  e.bytes = kProcessBytes + e.weights + e.held + e.working;
  return e;
}

int64_t default_memory_budget() {
  const int64_t available = available_memory_bytes();
  if (available < 0) return 0;  // unknown: no budget
  return available - std::max(available / 10, int64_t(256) << 20);
}

BudgetChoice choose_memory_budget(int64_t case_limit, int64_t option_limit) {
  if (case_limit) return {case_limit, "the case's mem="};
  if (option_limit) return {option_limit, "--mem"};
  return {default_memory_budget(), "the machine's available memory less a margin"};
}

std::string memory_refusal(const PreparedCase& p, const MemoryEstimate& e, int64_t budget,
                           const std::string& budget_source) {
  if (budget <= 0 || e.bytes <= budget) return "";
  std::string fix = "use a smaller res=";
  if (p.descriptor().tiles && !p.tiling.enabled) fix = "add tiling=on, or " + fix;
  return "res=" + std::to_string(p.c.height) + "x" + std::to_string(p.c.width) + " needs about " +
         e.text() + ", over the memory budget of " + format_bytes(budget) + " (" + budget_source +
         "): refused before allocating; " + fix + ", or give it more with --mem SIZE or mem=SIZE";
}

}  // namespace tp
