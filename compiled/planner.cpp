#include "compiled/planner.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <queue>
#include <set>

namespace tp::compiled {
namespace {

// An op's group while partitioning: an index, or one of these.
constexpr int kUnassigned = -1;
constexpr int kReserved = -2;  // an image attention's op, taken whole at its first op

bool is_pointwise(const Op& op) {
  const OpKind k = op.kind;
  return k == OpKind::kSilu || k == OpKind::kRelu || k == OpKind::kTanhClamp ||
         k == OpKind::kAffine || k == OpKind::kClamp || slices_channels(op);
}

struct GraphIndex {
  std::vector<std::vector<int>> consumers;  // by value id: ops reading it
  std::vector<bool> graph_output;
  std::vector<int> producer;  // by value id: op writing it, -1 for inputs
  explicit GraphIndex(const Graph& g)
      : consumers(g.value_names.size()),
        graph_output(g.value_names.size(), false),
        producer(g.value_names.size(), -1) {
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      for (int v : g.ops[i].inputs) consumers[std::size_t(v)].push_back(int(i));
      producer[std::size_t(g.ops[i].output)] = int(i);
    }
    for (const auto& [name, v] : g.outputs) graph_output[std::size_t(v)] = true;
  }
  const std::vector<int>& of(int value) const { return consumers[std::size_t(value)]; }
};

// to_q/to_k/to_v (linear_last, k and v on the query's input or another one: cross-attention)
// feeding a multi-head attention whose only reader is to_out, none of them in a group yet.
// Returns the five ops, or empty. (A channels-last plan takes an image attention whole,
// with its token views: image_attentions() in harness/core/graph.h.)
std::vector<int> match_nd_attention(const Graph& g, const GraphIndex& ix,
                                    const std::vector<int>& assigned, int q_op) {
  const Op& q = g.ops[std::size_t(q_op)];
  if (q.kind != OpKind::kLinearLast || ix.of(q.output).size() != 1) return {};
  const int attn = ix.of(q.output)[0];
  const Op& a = g.ops[std::size_t(attn)];
  if (a.kind != OpKind::kMultiHeadAttention || a.inputs.size() != 3 || a.inputs[0] != q.output)
    return {};
  const int k = ix.producer[std::size_t(a.inputs[1])], v = ix.producer[std::size_t(a.inputs[2])];
  for (int p : {k, v})
    if (p < 0 || p == q_op || assigned[std::size_t(p)] >= 0 ||
        g.ops[std::size_t(p)].kind != OpKind::kLinearLast ||
        ix.of(g.ops[std::size_t(p)].output).size() != 1 ||
        ix.graph_output[std::size_t(g.ops[std::size_t(p)].output)])
      return {};
  if (k == v || ix.of(a.output).size() != 1 || ix.graph_output[std::size_t(a.output)]) return {};
  const int out = ix.of(a.output)[0];
  if (g.ops[std::size_t(out)].kind != OpKind::kLinearLast) return {};
  return {q_op, k, v, attn, out};
}

// GEGLU (diffusers' FeedForward "geglu"): a projection whose only readers are the two halves of
// its last axis, one through GELU, multiplied. Returns proj, both slices, gelu, mul, or empty.
std::vector<int> match_geglu(const Graph& g, const GraphIndex& ix, int proj) {
  const Op& p = g.ops[std::size_t(proj)];
  if (p.kind != OpKind::kLinearLast || ix.graph_output[std::size_t(p.output)]) return {};
  const std::vector<int>& halves = ix.of(p.output);
  if (halves.size() != 2) return {};
  int gelu = -1;
  std::vector<int> slice_outputs;
  for (int s : halves) {
    const Op& op = g.ops[std::size_t(s)];
    if (op.kind != OpKind::kSlice || op.attrs.axis != -1 || ix.of(op.output).size() != 1 ||
        ix.graph_output[std::size_t(op.output)])
      return {};
    const int r = ix.of(op.output)[0];
    if (g.ops[std::size_t(r)].kind == OpKind::kGelu) {
      if (gelu >= 0 || ix.of(g.ops[std::size_t(r)].output).size() != 1 ||
          ix.graph_output[std::size_t(g.ops[std::size_t(r)].output)])
        return {};
      gelu = r;
      slice_outputs.push_back(g.ops[std::size_t(r)].output);
    } else {
      slice_outputs.push_back(op.output);
    }
  }
  if (gelu < 0) return {};
  const int mul = ix.of(g.ops[std::size_t(gelu)].output)[0];
  const Op& m = g.ops[std::size_t(mul)];
  if (m.kind != OpKind::kBinary || m.attrs.binary != BinaryOp::kMul ||
      std::set<int>(m.inputs.begin(), m.inputs.end()) !=
          std::set<int>(slice_outputs.begin(), slice_outputs.end()))
    return {};
  return {proj, std::min(halves[0], halves[1]), std::max(halves[0], halves[1]), gelu, mul};
}

// A LayerNorm whose every reader is a projection (linear_last) and whose value no one else
// needs: it joins its readers' group when they all land in one (norm + projection).
bool is_norm_before_projection(const Graph& g, const GraphIndex& ix, int op) {
  const Op& n = g.ops[std::size_t(op)];
  if (n.kind != OpKind::kLayerNorm || ix.graph_output[std::size_t(n.output)]) return false;
  const std::vector<int>& readers = ix.of(n.output);
  return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](int r) {
    return g.ops[std::size_t(r)].kind == OpKind::kLinearLast;
  });
}

// Whether value `v` is computed when group `group` runs: a graph input, the output of a group
// formed earlier or of this one, or (`conv_first`) the output of a conv in no group yet whose
// inputs are: the schedule runs that conv first (diffusers' ResNet computes conv_shortcut after
// conv2, then adds them).
bool computed_by(const Graph& g, const GraphIndex& ix, const std::vector<int>& assigned, int group,
                 int v, bool conv_first) {
  const int p = ix.producer[std::size_t(v)];
  if (p < 0) return true;
  const int home = assigned[std::size_t(p)];
  if (home >= 0) return home <= group;
  const Op& producer = g.ops[std::size_t(p)];
  if (!conv_first || producer.kind != OpKind::kConv) return false;
  return std::all_of(producer.inputs.begin(), producer.inputs.end(),
                     [&](int in) { return computed_by(g, ix, assigned, group, in, false); });
}

// An op that may end a group besides the pointwise ones: unary GELU, a reshape (row-major: the
// same elements), and a binary whose other operand is computed by then (an add's may come from
// a conv that runs first), so groups only ever read earlier groups.
bool is_epilogue(const Graph& g, const GraphIndex& ix, const std::vector<int>& assigned, int group,
                 int value, int reader) {
  const Op& op = g.ops[std::size_t(reader)];
  if (op.kind == OpKind::kGelu) return true;
  if (op.kind == OpKind::kReshape) return op.inputs.size() == 1;
  if (op.kind != OpKind::kBinary) return false;
  const bool add = op.attrs.binary == BinaryOp::kAdd;
  return std::all_of(op.inputs.begin(), op.inputs.end(), [&](int v) {
    return v == value || computed_by(g, ix, assigned, group, v, add);
  });
}

// Appends the pointwise ops that follow `value` while it has no other reader: the epilogue.
void absorb_epilogue(const Graph& g, const GraphIndex& ix, int value, std::vector<int>& assigned,
                     int group, std::vector<int>& ops) {
  while (!ix.graph_output[std::size_t(value)]) {
    const std::vector<int>& readers = ix.of(value);
    if (readers.empty()) return;
    bool all_slices = true;
    for (int r : readers)
      all_slices = all_slices && slices_channels(g.ops[std::size_t(r)]) &&
                   assigned[std::size_t(r)] == kUnassigned;
    if (readers.size() > 1 && all_slices) {  // the DiagonalGaussian tail: mean, logvar (+ clamp)
      for (int r : readers) {
        assigned[std::size_t(r)] = group;
        ops.push_back(r);
      }
      for (int r : readers)
        absorb_epilogue(g, ix, g.ops[std::size_t(r)].output, assigned, group, ops);
      return;
    }
    if (readers.size() != 1) return;
    const int r = readers[0];
    const Op& op = g.ops[std::size_t(r)];
    if (assigned[std::size_t(r)] != kUnassigned ||
        !(is_pointwise(op) || is_epilogue(g, ix, assigned, group, value, r)))
      return;
    assigned[std::size_t(r)] = group;
    ops.push_back(r);
    value = op.output;
  }
}

GroupKind kind_of(const Op& op) {
  if (runs_nd(op)) return GroupKind::kTensor;
  switch (op.kind) {
    case OpKind::kConv:  // a conv on the image kernels (conv2d_window)
      return GroupKind::kConv;
    case OpKind::kGroupNorm:
      return GroupKind::kGroupNorm;
    case OpKind::kInterpolateNearest:  // upsamples_2x()
      return GroupKind::kUpsample;
    default:
      return GroupKind::kElementwise;
  }
}

// Orders groups so each runs after the groups producing its inputs (a residual add fused into
// conv2 needs the shortcut conv, which the graph lists later), ties broken by first op.
std::vector<Group> schedule(std::vector<Group> groups, const Graph& g, const GraphIndex& ix,
                            const std::vector<int>& assigned) {
  const std::size_t n = groups.size();
  std::vector<std::set<int>> deps(n);
  std::vector<std::vector<int>> users(n);
  for (std::size_t gi = 0; gi < n; ++gi)
    for (int op : groups[gi].ops)
      for (int v : g.ops[std::size_t(op)].inputs) {
        const int producer = ix.producer[std::size_t(v)];
        if (producer >= 0 && assigned[std::size_t(producer)] != int(gi))
          deps[gi].insert(assigned[std::size_t(producer)]);
      }
  std::vector<int> pending(n);
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>>
      ready;  // (first op, group)
  for (std::size_t gi = 0; gi < n; ++gi) {
    pending[gi] = int(deps[gi].size());
    for (int d : deps[gi]) users[std::size_t(d)].push_back(int(gi));
    if (pending[gi] == 0) ready.push({groups[gi].ops[0], int(gi)});
  }
  std::vector<Group> ordered;
  while (!ready.empty()) {
    const int gi = ready.top().second;
    ready.pop();
    ordered.push_back(groups[std::size_t(gi)]);
    for (int u : users[std::size_t(gi)])
      if (--pending[std::size_t(u)] == 0) ready.push({groups[std::size_t(u)].ops[0], u});
  }
  TP_CHECK(ordered.size() == n, "fused groups form a cycle");
  return ordered;
}

}  // namespace

std::vector<Group> partition_into_groups(const Graph& g) {
  const GraphIndex ix(g);
  std::vector<int> assigned(g.ops.size(), kUnassigned);
  // Channels-last, an image attention is one group with its token views, taken at its first op
  // (reserved until then: no epilogue absorbs its flatten).
  std::map<int, std::vector<int>> image_attention;
  const std::vector<ImageAttention> attentions = image_attentions(g);
  if (!g.has_nd_ops(attentions))
    for (const ImageAttention& a : attentions) {
      image_attention[a.flatten] = a.ops();
      for (int o : a.ops()) assigned[std::size_t(o)] = kReserved;
    }
  std::vector<Group> groups;
  std::vector<int> norms;  // LayerNorms waiting for their projections' group
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    if (assigned[i] >= 0) continue;
    const Op& op = g.ops[i];
    if (is_norm_before_projection(g, ix, int(i))) {
      norms.push_back(int(i));
      continue;
    }
    const int id = int(groups.size());
    Group grp;
    grp.kind = kind_of(op);
    int head = op.output;
    const std::vector<int>& readers = ix.of(op.output);
    auto image = image_attention.find(int(i));
    std::vector<int> pattern = image != image_attention.end()
                                   ? image->second
                                   : match_nd_attention(g, ix, assigned, int(i));
    const std::vector<int> geglu =
        pattern.empty() ? match_geglu(g, ix, int(i)) : std::vector<int>{};
    if (upsamples_2x(op) && readers.size() == 1 && !ix.graph_output[std::size_t(op.output)] &&
        conv2d_window(g.ops[std::size_t(readers[0])])) {
      grp.kind = GroupKind::kConv;
      grp.upsample_prologue = true;
      grp.ops = {int(i), readers[0]};
      head = g.ops[std::size_t(readers[0])].output;
    } else if (!pattern.empty()) {
      grp.kind = GroupKind::kAttention;
      grp.ops = pattern;
      head = g.ops[std::size_t(pattern.back())].output;
    } else if (!geglu.empty()) {
      grp.ops = geglu;
      head = g.ops[std::size_t(geglu.back())].output;
    } else {
      grp.ops = {int(i)};
    }
    for (int o : grp.ops) assigned[std::size_t(o)] = id;
    absorb_epilogue(g, ix, head, assigned, id, grp.ops);
    groups.push_back(std::move(grp));
  }
  // Norm + projection: a LayerNorm runs first in its projections' group when they share one.
  for (int n : norms) {
    std::set<int> homes;
    for (int r : ix.of(g.ops[std::size_t(n)].output)) homes.insert(assigned[std::size_t(r)]);
    if (homes.size() == 1) {
      Group& grp = groups[std::size_t(*homes.begin())];
      grp.ops.insert(grp.ops.begin(), n);
      assigned[std::size_t(n)] = *homes.begin();
      continue;
    }
    assigned[std::size_t(n)] = int(groups.size());
    Group alone;
    alone.kind = GroupKind::kTensor;
    alone.ops = {n};
    groups.push_back(std::move(alone));
  }
  // Inputs and outputs at the group boundary.
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    Group& grp = groups[gi];
    std::set<int> inside;
    for (int o : grp.ops) inside.insert(g.ops[std::size_t(o)].output);
    for (int o : grp.ops)
      for (int v : g.ops[std::size_t(o)].inputs)
        if (!inside.count(v) &&
            std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end())
          grp.inputs.push_back(v);
    for (int o : grp.ops) {
      const int v = g.ops[std::size_t(o)].output;
      bool read_outside = ix.graph_output[std::size_t(v)];
      for (int r : ix.of(v)) read_outside = read_outside || assigned[std::size_t(r)] != int(gi);
      if (!read_outside) continue;
      grp.outputs.push_back(v);
      std::string name = g.ops[std::size_t(o)].name;
      for (const auto& [path, mv] : g.modules)
        if (mv == v) {
          name = path;  // the innermost module (registered first) names the checkpoint
          break;
        }
      grp.checkpoints.push_back(name);
    }
  }
  return schedule(std::move(groups), g, ix, assigned);
}

Status prepare_params(Plan& plan, const Weights& weights, WeightStore& store) {
  const Graph& g = *plan.graph;
  // Every layer is checked before anything is prepared, so a refused plan costs nothing.
  const bool skipped_in_fp8 = plan.faults.has(Fault::kCastSkipsSubmodule);
  for (const Group& grp : plan.groups)
    for (int o : grp.ops) {
      const Op& op = g.ops[std::size_t(o)];
      if (!skipped_in_fp8) TP_RETURN_IF_ERROR(plan.policy.check_layerwise(g, op, grp.policy));
      const LayerPolicy layer = plan.policy.for_op(g, op, grp.policy, skipped_in_fp8);
      if (is_matrix_op(op.kind)) TP_RETURN_IF_ERROR(check_supported(op.name, layer));
      if (plan.row_major && runs_nd(op) && grp.policy.accumulation != DType::kF32)
        return Error(op.name + ": weights in " + dtype_name(grp.policy.weight) +
                     " with activations in " + dtype_name(grp.policy.activation) +
                     " cannot accumulate in " + dtype_name(grp.policy.accumulation) + " in " +
                     op_label(op) +
                     " (the N-dimensional ops accumulate in f32 only); use acc=f32, or keep the "
                     "layer in fp32 with --keep-fp32 '" +
                     op.name + "'");
    }
  // Uses left of each parameter in this plan: at the last one, the store may free its source.
  std::map<std::string, int> uses;
  for (const Group& grp : plan.groups)
    for (int o : grp.ops)
      for (const std::string* key : {&g.ops[std::size_t(o)].weight, &g.ops[std::size_t(o)].bias})
        if (!key->empty()) ++uses[*key];
  for (const Group& grp : plan.groups)
    for (int o : grp.ops) {
      const Op& op = g.ops[std::size_t(o)];
      const bool matrix = is_matrix_op(op.kind);
      const LayerPolicy layer = plan.policy.for_op(g, op, grp.policy, skipped_in_fp8);
      for (const std::string* key : {&op.weight, &op.bias})
        if (!key->empty()) {
          TP_ASSIGN_OR_RETURN(plan.params[*key],
                              store.get(weights, plan.weights_identity, *key, layer,
                                        matrix && key == &op.weight, plan.faults));
          if (--uses[*key] == 0) store.done_with(weights, plan.weights_identity, *key);
        }
    }
  plan.stats.weight_bytes = 0;
  for (const auto& [key, p] : plan.params) plan.stats.weight_bytes += p->storage_bytes();
  return Status();
}

int64_t assign_offsets(std::map<int, Buffer>& buffers) {
  constexpr int64_t kAlign = 64;
  std::vector<Buffer*> order;
  for (auto& [v, b] : buffers) order.push_back(&b);
  // Largest first, then first-fit into the lowest gap among buffers whose lifetimes overlap.
  std::stable_sort(order.begin(), order.end(),
                   [](const Buffer* a, const Buffer* b) { return a->bytes > b->bytes; });
  std::vector<const Buffer*> placed;
  int64_t peak = 0;
  for (Buffer* b : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Buffer* p : placed)
      if (p->first_group <= b->last_group && b->first_group <= p->last_group)
        busy.emplace_back(p->offset, p->offset + p->bytes);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + b->bytes <= lo) break;
      at = std::max(at, (hi + kAlign - 1) / kAlign * kAlign);
    }
    b->offset = at;
    peak = std::max(peak, at + b->bytes);
    placed.push_back(b);
  }
  return peak;
}

Expected<std::unique_ptr<Plan>> compile_plan(const PlanRequest& r, WeightStore& store) {
  const auto start = std::chrono::steady_clock::now();
  const Graph& g = *r.graph;
  auto plan = std::make_unique<Plan>();
  plan->graph = std::make_shared<const Graph>(g);
  plan->graph_hash = g.hash();
  plan->weights_identity = r.weights_identity;
  plan->capacity_shape = r.capacity_shape;
  plan->other_inputs = r.other_inputs;
  plan->row_major = g.has_nd_ops();
  plan->policy = r.policy;
  plan->faults = r.faults;
  plan->device = r.device;
  plan->groups = partition_into_groups(g);
  TP_ASSIGN_OR_RETURN(std::vector<Shape> shapes, infer_shapes(g, r.capacity_shape, r.other_inputs));
  if (!plan->row_major)  // channels-last: an add's operands must share their layout
    for (const Op& op : g.ops)
      if (op.kind == OpKind::kBinary &&
          shapes[std::size_t(op.inputs[0])] != shapes[std::size_t(op.inputs[1])])
        return Error(g.name + ": " + op.name + " broadcasts " +
                     shape_string(shapes[std::size_t(op.inputs[0])]) + " and " +
                     shape_string(shapes[std::size_t(op.inputs[1])]) +
                     " in a graph of image ops, which runs channels-last; the family's graph "
                     "builder must reshape the operand to the other's shape");

  const LayerPolicy fp32{DType::kF32, DType::kF32, DType::kF32, r.policy.base.scale,
                         r.policy.base.saturation};
  for (Group& grp : plan->groups) {
    // A group runs in fp32 when any of its ops is kept (a kept layer's epilogue stays with it).
    grp.policy = g.fp32_arithmetic ? fp32 : r.policy.base;
    for (int o : grp.ops) {
      const LayerPolicy layer = r.policy.for_layer(g.ops[std::size_t(o)].name);
      if (!(layer == r.policy.base)) grp.policy = layer;
    }
  }
  TP_RETURN_IF_ERROR(prepare_params(*plan, *r.weights, store));
  // Buffers: graph inputs (in their first reader's activation dtype) and group outputs.
  const int last = int(plan->groups.size());
  auto add_buffer = [&](int v, DType dt, int first) {
    Buffer b;
    b.value = v;
    b.dtype = dt;
    b.shape = shapes[std::size_t(v)];
    b.bytes = shape_numel(b.shape) * int64_t(dtype_size(dt));
    b.first_group = first;
    b.last_group = first;
    plan->buffers[v] = b;
  };
  // A timestep sinusoid's input stays fp32 (as diffusers keeps timesteps: t = 999 has no f16
  // neighbours closer than 0.5).
  auto reads_timesteps = [&](int v) {
    return std::any_of(g.ops.begin(), g.ops.end(), [&](const Op& op) {
      return op.kind == OpKind::kTimestepEmbedding && op.inputs[0] == v;
    });
  };
  for (const auto& [name, v] : g.inputs)
    for (const Group& grp : plan->groups)
      if (std::count(grp.inputs.begin(), grp.inputs.end(), v)) {
        add_buffer(v, reads_timesteps(v) ? DType::kF32 : grp.policy.activation, -1);
        break;
      }
  // An fp32 island's output stays f32 whatever the group's activation dtype.
  std::vector<bool> island(g.value_names.size(), false);
  for (const Op& op : g.ops) island[std::size_t(op.output)] = op.fp32_result;
  for (int gi = 0; gi < last; ++gi)
    for (int v : plan->groups[std::size_t(gi)].outputs)
      add_buffer(
          v, island[std::size_t(v)] ? DType::kF32 : plan->groups[std::size_t(gi)].policy.activation,
          gi);
  // fp32 arithmetic hands its results on in the pipeline's activation dtype.
  if (g.fp32_arithmetic)
    for (const auto& [name, v] : g.outputs) {
      Buffer& b = plan->buffers.at(v);
      b.dtype = r.policy.base.activation;
      b.bytes = shape_numel(b.shape) * int64_t(dtype_size(b.dtype));
    }
  for (int gi = 0; gi < last; ++gi)
    for (int v : plan->groups[std::size_t(gi)].inputs) {
      Buffer& b = plan->buffers.at(v);
      b.last_group = std::max(b.last_group, gi);
    }
  for (const auto& [name, v] : g.outputs) plan->buffers.at(v).last_group = last;
  // The arena-interval-short fault: every interval ends one group before its last read.
  if (plan->faults.has(Fault::kArenaIntervalShort))
    for (auto& [v, b] : plan->buffers)
      if (b.last_group < last) b.last_group = std::max(b.first_group, b.last_group - 1);

  PlanStats& s = plan->stats;
  for (const auto& [v, b] : plan->buffers) s.unshared_bytes += b.bytes;
  s.arena_bytes = assign_offsets(plan->buffers);
  s.groups = int(plan->groups.size());
  s.ops = int(g.ops.size());
  s.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace tp::compiled
