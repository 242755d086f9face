#include "compiled/executor.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/parallel.h"
#include "harness/core/transpose.h"

namespace tp::compiled {
namespace {

namespace em = emulated;

Shape nhwc(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

class GroupRun {
 public:
  GroupRun(const Plan& plan, std::byte* arena, const std::vector<Shape>& shapes,
           const std::map<int, BufferView>& views, const FaultSet* faults = nullptr)
      : plan_(plan),
        g_(*plan.graph),
        arena_(arena),
        shapes_(shapes),
        views_(views),
        faults_(faults ? *faults : plan.faults) {}

  // The group's values after run(): inputs as read (fp32) and every op output before rounding.
  const std::map<int, Tensor>& values() const { return local_; }

  void run(const Group& grp) {
    local_.clear();
    views_of_.clear();
    const LayerPolicy& pol = grp.policy;
    const FaultSet& f = faults_;
    for (int o : grp.ops) {
      const Op& op = g_.ops[std::size_t(o)];
      if (!plan_.row_major && (op.kind == OpKind::kReshape || op.kind == OpKind::kPermute)) {
        views_of_[op.output] = op.inputs[0];  // an image attention's token views: the same memory
        continue;
      }
      if (plan_.row_major && runs_nd(op)) {
        std::vector<const Tensor*> in;
        for (int v : op.inputs) in.push_back(&value(v));
        local_[op.output] = em::nd_op<float>(
            op, in, [this](const std::string& key) { return &param(key); },
            shapes_[std::size_t(op.output)], f, pol.attention_operands(), pol.activation);
        continue;
      }
      // In a row-major plan the [B,C,H,W] kinds whose kernels index channels run on
      // channels-last copies (pointwise ops and adds do not care).
      // The copies are read in place of the values until the op's end; the values stay.
      const bool relayout = plan_.row_major && channels_matter(op.kind);
      if (relayout)
        for (int v : op.inputs)
          if (!channels_last_.count(v))
            channels_last_.emplace(v, relaid(value(v), shapes_[std::size_t(v)], true));
      Tensor out;
      switch (op.kind) {
        case OpKind::kInterpolateNearest:       // upsamples_2x() (runs_nd() is false)
          if (grp.upsample_prologue) continue;  // the conv reads through it
          out = em::upsample_nearest2x(value(op.inputs[0]));
          break;
        case OpKind::kConv: {  // conv2d_window() takes it (runs_nd() is false)
          const bool up = grp.upsample_prologue;
          const int src = up ? g_.ops[std::size_t(grp.ops[0])].inputs[0] : op.inputs[0];
          const em::Upsample mode = !up ? em::Upsample::kNone
                                    : f.has(Fault::kUpsampleOffByOne)
                                        ? em::Upsample::kNearest2xOffByOne
                                        : em::Upsample::kNearest2x;
          out = em::conv2d(value(src), param(op.weight), param_or_null(op.bias), *conv2d_window(op),
                           mode, pol.accumulation);
          break;
        }
        case OpKind::kLinearLast:  // on an image attention's tokens, channels-last: a 1x1 conv
          out = em::conv2d(value(op.inputs[0]), param(op.weight), param_or_null(op.bias),
                           Conv2dWindow{}, em::Upsample::kNone, pol.accumulation);
          break;
        case OpKind::kGroupNorm:
          out = em::group_norm(value(op.inputs[0]), param(op.weight), param(op.bias),
                               op.attrs.groups, op.attrs.eps,
                               f.has(Fault::kGroupNormF16Accum)  ? DType::kF16
                               : f.has(Fault::kGroupNormOnePass) ? DType::kF32
                                                                 : DType::kF64,
                               f.has(Fault::kGroupNormVectorTail), plan_.row_major);
          break;
        case OpKind::kMultiHeadAttention:  // an image attention's one head, channels-last
          out = em::attention(value(op.inputs[0]), value(op.inputs[1]), value(op.inputs[2]),
                              op.attrs.scale, f.has(Fault::kSoftmaxNoMax), pol.activation,
                              pol.attention_operands());
          break;
        case OpKind::kBinary: {  // an add: of one shape in any layout, or broadcast row-major
          const std::vector<const Tensor*> in{&value(op.inputs[0]), &value(op.inputs[1])};
          out = em::nd_op<float>(op, in, nullptr, shapes_[std::size_t(op.output)], f);
          break;
        }
        case OpKind::kSlice:  // slices_channels() (runs_nd() is false)
          out = em::slice_channels(value(op.inputs[0]), op.attrs.begin, op.attrs.end);
          break;
        default:
          if (op.kind == OpKind::kSilu && f.has(Fault::kSiluInActivationDtype))
            out = em::silu_rounded_to(pol.activation, value(op.inputs[0]));
          else
            out = em::pointwise(op.kind, op.attrs, value(op.inputs[0]));
          break;
      }
      if (relayout) {
        channels_last_.clear();
        out = relaid(out, shapes_[std::size_t(op.output)], false);
      }
      local_[op.output] = std::move(out);
    }
    for (int v : grp.outputs) {
      const Buffer& b = plan_.buffers.at(v);
      const Tensor& t = value(v);  // computed here (through a token view: its image)
      const bool truncate = (b.dtype == DType::kF16 && f.has(Fault::kF16StoreTruncate)) ||
                            (b.dtype == DType::kBF16 && f.has(Fault::kBf16StoreTruncate));
      em::store_rounded(t.data<float>(), t.numel(), b.dtype, arena_ + b.offset, truncate);
    }
  }

 private:
  // GroupNorm runs on either layout.
  static bool channels_matter(OpKind k) {
    return k == OpKind::kConv || k == OpKind::kInterpolateNearest || k == OpKind::kSlice;
  }
  // An fp32 [B,C,*spatial] tensor as channels-last (`to_last`) or back, at logical shape
  // `shape` (other ranks than 4 as [B, C, prod(spatial), 1]).
  static Tensor relaid(const Tensor& t, const Shape& shape, bool to_last) {
    const Shape four = shape.size() == 4 ? shape
                                         : Shape{shape[0], shape[1],
                                                 shape_numel(shape) / (shape[0] * shape[1]), 1};
    Tensor out = Tensor::uninitialized(DType::kF32, to_last ? nhwc(four) : shape);
    transpose_channels(t.raw(), out.raw(), four, sizeof(float), to_last);
    return out;
  }
  const Tensor& value(int v) {
    if (auto copy = channels_last_.find(v); copy != channels_last_.end()) return copy->second;
    for (auto view = views_of_.find(v); view != views_of_.end(); view = views_of_.find(v))
      v = view->second;
    auto it = local_.find(v);
    if (it != local_.end()) return it->second;
    const Shape& logical = shapes_[std::size_t(v)];
    Tensor t = Tensor::uninitialized(DType::kF32, plan_.row_major ? logical : nhwc(logical));
    auto view = views_.find(v);
    if (view != views_.end()) {
      em::load_f32(view->second.data, view->second.dtype, t.numel(), t.data<float>());
    } else {
      const Buffer& b = plan_.buffers.at(v);
      em::load_f32(arena_ + b.offset, b.dtype, t.numel(), t.data<float>());
    }
    return local_.emplace(v, std::move(t)).first->second;
  }
  const PreparedParam& param(const std::string& key) const { return *plan_.params.at(key); }
  const PreparedParam* param_or_null(const std::string& key) const {
    return key.empty() ? nullptr : &param(key);
  }

  const Plan& plan_;
  const Graph& g_;
  std::byte* arena_;
  const std::vector<Shape>& shapes_;
  const std::map<int, BufferView>& views_;
  const FaultSet faults_;
  std::map<int, Tensor> local_;
  std::map<int, Tensor> channels_last_;  // channels-last copies of the inputs of the op running
  std::map<int, int> views_of_;          // a token view's value -> the value whose memory it is
};

}  // namespace

namespace {

// One image's [rows, cols] matrix of T into [cols, rows], in tiles of 32 x 32 so that both the
// rows read and the rows written stay in L1 (element by element, a stride of `cols` on one side
// missed the cache on every element: 4% of the emulated SDXL step at 1024^2).
template <class T>
void transpose_tiled(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t rt = 0; rt < row_tiles; ++rt)
    for (int64_t ct = 0; ct < col_tiles; ++ct) {
      const int64_t r_end = std::min(rows, (rt + 1) * kTile),
                    c_end = std::min(cols, (ct + 1) * kTile);
      const int64_t r0 = rt * kTile, c0 = ct * kTile;
      if constexpr (sizeof(T) == sizeof(float))  // bit patterns moved as floats, unchanged
        simd::transpose_floats(reinterpret_cast<const float*>(src) + r0 * cols + c0, cols,
                               reinterpret_cast<float*>(dst) + c0 * rows + r0, rows, r_end - r0,
                               c_end - c0);
      else
        for (int64_t r = r0; r < r_end; ++r)
          for (int64_t c = c0; c < c_end; ++c) dst[c * rows + r] = src[r * cols + c];
    }
}

}  // namespace

void transpose_channels(const std::byte* src, std::byte* dst, const Shape& s, std::size_t elem,
                        bool to_last) {
  const int64_t b = s[0], c = s[1], hw = s[2] * s[3];
  // Per image: NCHW is [c, hw], NHWC is [hw, c].
  const int64_t rows = to_last ? c : hw, cols = to_last ? hw : c;
  const std::size_t image = std::size_t(c * hw) * elem;
  for (int64_t n = 0; n < b; ++n) {
    const std::byte* from = src + std::size_t(n) * image;
    std::byte* to = dst + std::size_t(n) * image;
    if (elem == 4)
      transpose_tiled(reinterpret_cast<const uint32_t*>(from), reinterpret_cast<uint32_t*>(to),
                      rows, cols);
    else if (elem == 2)
      transpose_tiled(reinterpret_cast<const uint16_t*>(from), reinterpret_cast<uint16_t*>(to),
                      rows, cols);
    else if (elem == 1)
      transpose_tiled(reinterpret_cast<const uint8_t*>(from), reinterpret_cast<uint8_t*>(to), rows,
                      cols);
    else
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < cols; ++col)
          std::memcpy(to + std::size_t(col * rows + r) * elem,
                      from + std::size_t(r * cols + col) * elem, elem);
  }
}

Expected<BoundInputs> bind_inputs(const Plan& plan, const std::vector<PlanInput>& inputs) {
  const Graph& g = *plan.graph;
  TP_CHECK(inputs.size() == g.inputs.size(), "plan inputs");
  auto shape_of = [](const PlanInput& in) {
    return in.tensor ? in.tensor->shape() : in.view.shape;
  };
  const Shape in_shape = shape_of(inputs[0]);
  const Shape& cap = plan.capacity_shape;
  const bool fits = plan.row_major
                        ? in_shape == cap
                        : in_shape.size() == 4 && in_shape[0] == cap[0] && in_shape[1] == cap[1] &&
                              in_shape[2] <= cap[2] && in_shape[3] <= cap[3];
  if (!fits)
    return Error("input " + shape_string(in_shape) + " does not fit the plan compiled for " +
                 shape_string(cap));
  for (std::size_t i = 1; i < inputs.size(); ++i)
    if (shape_of(inputs[i]) != plan.other_inputs[i - 1])
      return Error("input " + inputs[i].name + " " + shape_string(shape_of(inputs[i])) +
                   " does not fit the plan compiled for " + shape_string(plan.other_inputs[i - 1]));
  BoundInputs bound;
  TP_ASSIGN_OR_RETURN(bound.shapes, plan_shapes(plan, in_shape));
  for (const PlanInput& in : inputs) {
    int v = -1;
    for (const auto& [name, id] : g.inputs)
      if (name == in.name) v = id;
    TP_CHECK(v >= 0, "graph " + g.name + " has no input " + in.name);
    if (!in.tensor)
      bound.views[v] = in.view;
    else if (plan.buffers.count(v))  // else an input no group reads
      bound.uploads.emplace_back(v, in.tensor);
  }
  return bound;
}

Expected<std::vector<Shape>> bind_group_inputs(const Plan& plan, int index,
                                               const Shape& input_shape,
                                               const std::map<int, Tensor>& values) {
  TP_CHECK(index >= 0 && index < int(plan.groups.size()), "group index");
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes, plan_shapes(plan, input_shape));
  for (int v : plan.groups[std::size_t(index)].inputs) {
    auto it = values.find(v);
    const std::string& name = plan.graph->value_names[std::size_t(v)];
    if (it == values.end())
      return Error("group " + std::to_string(index) + " reads " + name + ", which was not given");
    if (it->second.shape() != shapes[std::size_t(v)])
      return Error("group " + std::to_string(index) + " reads " + name + " as " +
                   shape_string(shapes[std::size_t(v)]) + " but it was given as " +
                   shape_string(it->second.shape()));
  }
  return shapes;
}

void stage_input(const Plan& plan, const Tensor& t, DType dtype, std::byte* dst) {
  const Tensor rounded = t.to(dtype);
  if (plan.row_major)
    std::memcpy(dst, rounded.raw(), rounded.nbytes());
  else
    transpose_channels(rounded.raw(), dst, rounded.shape(), dtype_size(dtype), true);
}

Expected<std::vector<Tensor>> execute_group(const Plan& plan, std::byte* arena, int index,
                                            const Shape& input_shape,
                                            const std::map<int, Tensor>& values) {
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes,
                      bind_group_inputs(plan, index, input_shape, values));
  const Group& grp = plan.groups[std::size_t(index)];
  for (int v : grp.inputs) {
    const Buffer& b = plan.buffers.at(v);
    stage_input(plan, values.at(v), b.dtype, arena + b.offset);
  }
  const std::map<int, BufferView> no_views;
  GroupRun(plan, arena, shapes, no_views).run(grp);
  std::vector<Tensor> out;
  for (int v : grp.outputs) out.push_back(read_value(plan, arena, v, shapes[std::size_t(v)]));
  return out;
}

Expected<GroupReplay> replay_group(const Plan& plan, int index, const Shape& input_shape,
                                   const std::map<int, Tensor>& values, const FaultSet& faults) {
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes,
                      bind_group_inputs(plan, index, input_shape, values));
  const Group& grp = plan.groups[std::size_t(index)];
  std::vector<std::byte> arena(std::size_t(plan.stats.arena_bytes));
  for (int v : grp.inputs) {
    const Buffer& b = plan.buffers.at(v);
    stage_input(plan, values.at(v), b.dtype, arena.data() + b.offset);
  }
  const std::map<int, BufferView> no_views;
  GroupRun run(plan, arena.data(), shapes, no_views, &faults);
  run.run(grp);
  auto to_nchw = [&](int v) {
    // Row-major values, and an image attention's tokens [B,H*W,C] (channels-last is their
    // row-major order), are as they are.
    if (plan.row_major || shapes[std::size_t(v)].size() != 4)
      return run.values().at(v).reshaped(shapes[std::size_t(v)]);
    Tensor out = Tensor::uninitialized(DType::kF32, shapes[std::size_t(v)]);
    transpose_channels(run.values().at(v).raw(), out.raw(), out.shape(), sizeof(float), false);
    return out;
  };
  GroupReplay replay;
  for (int v : grp.inputs)
    if (run.values().count(v)) replay.inputs.emplace(v, to_nchw(v));
  for (int o : grp.ops) {
    const int v = plan.graph->ops[std::size_t(o)].output;
    if (run.values().count(v)) replay.ops.emplace_back(o, to_nchw(v));
  }
  for (int v : grp.outputs)
    replay.stored.push_back(read_value(plan, arena.data(), v, shapes[std::size_t(v)]));
  return replay;
}

Tensor read_value(const Plan& plan, const std::byte* arena, int value, const Shape& shape) {
  const Buffer& b = plan.buffers.at(value);
  Tensor out = Tensor::uninitialized(b.dtype, shape);
  if (plan.row_major)
    std::memcpy(out.raw(), arena + b.offset, out.nbytes());
  else
    transpose_channels(arena + b.offset, out.raw(), shape, dtype_size(b.dtype), false);
  return out;
}

BufferView view_value(const Plan& plan, const std::byte* arena, int value, const Shape& shape) {
  const Buffer& b = plan.buffers.at(value);
  return BufferView{arena + b.offset, b.dtype, shape};
}

Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs,
               const GroupObserver& observe) {
  TP_ASSIGN_OR_RETURN(BoundInputs bound, bind_inputs(plan, inputs));
  for (const auto& [v, t] : bound.uploads) {
    const Buffer& b = plan.buffers.at(v);
    stage_input(plan, *t, b.dtype, arena + b.offset);  // one rounding from the file's dtype
  }
  GroupRun run(plan, arena, bound.shapes, bound.views);
  for (const Group& grp : plan.groups) {
    run.run(grp);
    if (!observe) continue;
    NamedTensors stored;
    for (std::size_t i = 0; i < grp.outputs.size(); ++i)
      stored.emplace_back(
          grp.checkpoints[i],
          read_value(plan, arena, grp.outputs[i], bound.shapes[std::size_t(grp.outputs[i])]));
    observe(grp, stored);
  }
  return Status();
}

}  // namespace tp::compiled
