// Runs a plan on the CPU with the emulated kernels: group by group, each group's ops in fp32,
// its outputs rounded once into their arena buffers.
#pragma once

#include <functional>
#include <map>

#include "compiled/plan.h"
#include "harness/core/safetensors.h"

namespace tp::compiled {

// A value held outside this plan's arena (another plan's output): channels-last data.
struct BufferView {
  const std::byte* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;  // NCHW
};

struct PlanInput {
  std::string name;
  const Tensor* tensor = nullptr;  // NCHW, any float dtype; rounded once into the input buffer
  BufferView view;                 // used when tensor is null: read in place, no copy
};

// Called after each group with the values it stored (NCHW copies, in their storage dtype),
// named by checkpoint. Watching copies out; it never changes what runs or how.
using GroupObserver = std::function<void(const Group& group, const NamedTensors& checkpoints)>;

// NCHW <-> NHWC by bytes (any element size): `to_last` reads NCHW `nchw` and writes NHWC.
void transpose_channels(const std::byte* src, std::byte* dst, const Shape& nchw, std::size_t elem,
                        bool to_last);

// A plan's inputs checked against it, before any group runs: the actual value shapes, the
// views read in place, and the tensors to round (once) into their input buffers.
struct BoundInputs {
  std::vector<Shape> shapes;                           // per value, NCHW, at the actual input shape
  std::map<int, BufferView> views;                     // by value id
  std::vector<std::pair<int, const Tensor*>> uploads;  // value id, tensor
};
Expected<BoundInputs> bind_inputs(const Plan& plan, const std::vector<PlanInput>& inputs);
// `t` rounded once into `dtype` and written at `dst` in the plan's layout (channels-last, or
// row-major in a plan of N-dimensional ops).
void stage_input(const Plan& plan, const Tensor& t, DType dtype, std::byte* dst);

// Checks a lone group run (execute_group): value shapes at `input_shape`, and every input value
// of group `index` given in `values` at its shape.
Expected<std::vector<Shape>> bind_group_inputs(const Plan& plan, int index,
                                               const Shape& input_shape,
                                               const std::map<int, Tensor>& values);

// Runs `plan` in `arena` (plan.stats.arena_bytes). Input shapes may be smaller than the
// plan's capacity shape (bucketed plans); kernels then run on the actual extent only.
Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs,
               const GroupObserver& observe = {});

// Runs group `index` alone on `values` (its input values by id, NCHW, each rounded once into its
// buffer's dtype) and returns its outputs in group.outputs order: how a layer's local error is
// measured, and how two backends are compared on the same inputs.
Expected<std::vector<Tensor>> execute_group(const Plan& plan, std::byte* arena, int index,
                                            const Shape& input_shape,
                                            const std::map<int, Tensor>& values);

// One group replayed op by op on the emulated kernels (the numerics contract, whatever backend
// the plan was made for), on `values` as execute_group takes them, with `faults` in place of the
// plan's: NaN provenance replays with and without them to tell an injected fault from the data.
struct GroupReplay {
  std::map<int, Tensor>
      inputs;  // value id -> NCHW f32, as the group read them (rounded to storage)
  std::vector<std::pair<int, Tensor>> ops;  // op index -> NCHW f32 output, before any rounding
  std::vector<Tensor> stored;               // per group output, NCHW, as stored (rounded)
};
Expected<GroupReplay> replay_group(const Plan& plan, int index, const Shape& input_shape,
                                   const std::map<int, Tensor>& values, const FaultSet& faults);

// A value after execute(), as an NCHW tensor in its storage dtype, and as a view for chaining.
Tensor read_value(const Plan& plan, const std::byte* arena, int value, const Shape& shape);
BufferView view_value(const Plan& plan, const std::byte* arena, int value, const Shape& shape);

}  // namespace tp::compiled
