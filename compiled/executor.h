// Runs a plan on the CPU with the emulated kernels: group by group, each group's ops in fp32,
// its outputs rounded once into their arena buffers.
#pragma once

#include <functional>

#include "compiled/plan.h"
#include "harness/safetensors.h"

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

// Runs `plan` in `arena` (plan.stats.arena_bytes). Input shapes may be smaller than the
// plan's capacity shape (bucketed plans); kernels then run on the actual extent only.
Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs, const GroupObserver& observe = {});

// A value after execute(), as an NCHW tensor in its storage dtype, and as a view for chaining.
Tensor read_value(const Plan& plan, const std::byte* arena, int value, const Shape& shape);
BufferView view_value(const Plan& plan, const std::byte* arena, int value, const Shape& shape);

}  // namespace tp::compiled
