// The N-dimensional ops on the compiled path's emulation: one op per group, on row-major
// tensors in their logical shapes, computing in T (fp32 under the numerics contract; the tests
// also run them in fp64 against LibTorch). Weights are read as stored (decoded exactly, fp8
// scales applied to the accumulator); statistics of the norms are taken in double, as the
// emulated GroupNorm does. In fp32 the convs, linears and attention products are GEMMs (sgemm, as
// the emulated conv2d: the same bits on any number of threads); the loops remain for fp64 (the
// tests against LibTorch). An implementation of its own: it shares no code with the reference.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "compiled/kernels/emulated/kernels.h"
#include "harness/core/attention_head.h"
#include "harness/core/parallel.h"
#include "harness/core/sgemm.h"
#include "harness/core/shapes.h"

namespace tp::compiled::emulated {
namespace {

constexpr int64_t kParallelWork = kParallelElements;

template <class T>
T at_or_zero(const PreparedParam* p, int64_t i) {
  return p ? T(p->values[std::size_t(i)]) : T(0);
}

// linear_last in fp32: one GEMM x W^T (W decoded as it is packed), then scale and bias (a bias
// alone is added after the sum inside the GEMM).
Tensor linear_last_gemm(const Tensor& x, const PreparedParam& w, const PreparedParam* bias,
                        const Shape& out_shape) {
  const int64_t din = w.shape[1], dout = w.shape[0], rows = x.numel() / din;
  Tensor result = Tensor::uninitialized(DType::kF32, out_shape);
  float* po = result.data<float>();
  const bool scaled = !w.scales.empty();
  sgemm::gemm(rows, dout, din, {x.data<float>(), din, 1}, weight_rows_packer(w), {po, dout, 1},
              nullptr, bias && !scaled ? bias->values.data() : nullptr);
  if (scaled)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < dout; ++o) po[r * dout + o] = finish(po[r * dout + o], w, bias, o);
  return result;
}

// Over the last axis: out[r, o] = sum_i x[r, i] w[o, i] (+ bias).
template <class T>
Tensor linear_last(const Tensor& x, const PreparedParam& w, const PreparedParam* bias,
                   const Shape& out_shape) {
  const int64_t din = w.shape[1], dout = w.shape[0], rows = x.numel() / din;
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const T* px = x.data<T>();
  T* po = result.data<T>();
  const ParamFloats weights(w);
#pragma omp parallel for schedule(static) if (rows * din * dout > kParallelWork)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < dout; ++o) {
      const float* wo = weights.data() + o * din;
      T acc = 0;
      for (int64_t i = 0; i < din; ++i) acc += px[r * din + i] * T(wo[i]);
      po[r * dout + o] = finish(acc, w, bias, o);
    }
  return result;
}

// softmax(q_h k_h^T * scale + mask) v_h per batch and head, the row max subtracted; a query of
// frame f sees keys of frames <= f when frame_tokens > 0.
template <class T>
Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                            const OpAttrs& a, bool keys_as_queries) {
  const int64_t batch = q.dim(0), lq = q.dim(1), heads = a.heads;
  const int64_t stored_keys = k.dim(1);  // the keys' stride in k and v
  // The fault: as many keys as queries (clamped to the keys there are).
  const int64_t lk = keys_as_queries ? std::min(stored_keys, lq) : stored_keys;
  const int64_t dq = q.dim(2), dvall = v.dim(2), dh = dq / heads, dv = dvall / heads;
  Tensor result = Tensor::uninitialized(dtype_of<T>(), {batch, lq, dvall});
  const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
  const T* pm = mask ? mask->data<T>() : nullptr;
  const int64_t mask_batch = mask && mask->rank() == 3 ? lq * stored_keys : 0;
  T* po = result.data<T>();
  const T scale = T(a.scale);
#pragma omp parallel for collapse(2) \
    schedule(static) if (batch * heads * lq * lk * dh > kParallelWork)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<T> p(static_cast<std::size_t>(lk));
      for (int64_t i = 0; i < lq; ++i) {
        const T* qi = pq + (b * lq + i) * dq + h * dh;
        T max = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < lk; ++j) {
          T s = -std::numeric_limits<T>::infinity();
          if (a.frame_tokens <= 0 || j / a.frame_tokens <= i / a.frame_tokens) {
            const T* kj = pk + (b * stored_keys + j) * dq + h * dh;
            T dot = 0;
            for (int64_t d = 0; d < dh; ++d) dot += qi[d] * kj[d];
            s = dot * scale;
            if (pm) s += pm[b * mask_batch + i * stored_keys + j];
          }
          p[std::size_t(j)] = s;
          max = std::max(max, s);
        }
        T sum = 0;
        for (T& s : p) sum += (s = std::exp(s - max));
        T* oi = po + (b * lq + i) * dvall + h * dv;
        for (int64_t d = 0; d < dv; ++d) oi[d] = 0;
        for (int64_t j = 0; j < lk; ++j) {
          const T w = p[std::size_t(j)] / sum;
          const T* vj = pv + (b * stored_keys + j) * dvall + h * dv;
          for (int64_t d = 0; d < dv; ++d) oi[d] += w * vj[d];
        }
      }
    }
  return result;
}

// multi_head_attention in fp32 with sgemm's products (bits independent of the thread count): per
// batch, head and block of queries (attend_head), the scores Q_h K_h^T (rows x keys, never the
// whole matrix), then softmax_row (scaled, masked, the row max subtracted, exp, each weight times
// the reciprocal of its row's sum, as the CUDA kernel), then the weights times V_h: the loop above
// in fp32, in another order. Under attn=act (`operands` f16/bf16) q, k, v and the weights are
// rounded to it first. `no_max` (the softmax-no-max fault): exp(s) without the row max, held in
// `activation`.
Tensor multi_head_attention_gemm(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                 const Tensor* mask, const OpAttrs& a, bool keys_as_queries,
                                 DType operands, bool no_max, DType activation) {
  const RoundedOperand rq(q_in, operands), rk(k_in, operands), rv(v_in, operands);
  const Tensor &q = rq.get(), &k = rk.get(), &v = rv.get();
  const int64_t batch = q.dim(0), lq = q.dim(1), heads = a.heads, stored_keys = k.dim(1);
  const int64_t lk = keys_as_queries ? std::min(stored_keys, lq) : stored_keys;  // the fault
  const int64_t dq = q.dim(2), dvall = v.dim(2), dh = dq / heads, dv = dvall / heads;
  Tensor result = Tensor::uninitialized(DType::kF32, {batch, lq, dvall});
  const float* pm = mask ? mask->data<float>() : nullptr;
  const int64_t mask_batch = mask && mask->rank() == 3 ? lq * stored_keys : 0;
  const SoftmaxRow f{float(a.scale), no_max, activation, operands};
  const auto head = [&](int64_t b, int64_t h, bool parallel_blocks) {
    const sgemm::SoftmaxRows softmax = [&](int64_t i0, int64_t rows, float* scores) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;  // frame-causal: the keys of its own and earlier frames
        const int64_t seen =
            a.frame_tokens > 0 ? std::min(lk, (i / a.frame_tokens + 1) * a.frame_tokens) : lk;
        softmax_row(scores + r * lk, pm ? pm + b * mask_batch + i * stored_keys : nullptr, seen, lk,
                    f);
      }
    };
    sgemm::attend_head(
        {q.data<float>() + b * lq * dq + h * dh, k.data<float>() + b * stored_keys * dq + h * dh,
         v.data<float>() + b * stored_keys * dvall + h * dv,
         result.data<float>() + b * lq * dvall + h * dv, lq, lk, dh, dv, dq, dq, dvall, dvall},
        parallel_blocks, softmax);
  };
  // Many heads: a head per thread; fewer than the threads: the heads in turn, blocks on the team.
  if (batch * heads < omp_get_max_threads()) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h) head(b, h, true);
    return result;
  }
#pragma omp parallel for collapse(2) schedule(static) if (batch * lq * lk * dq >= kParallelMacs)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) head(b, h, false);
  return result;
}

// LayerNorm over the last `n` elements of each row (rms: RMSNorm, no centering), statistics in
// double, two passes.
template <class T>
Tensor normalize(const Tensor& x, int64_t n, const PreparedParam* gamma, const PreparedParam* beta,
                 double eps, bool rms) {
  Tensor result = Tensor::uninitialized(dtype_of<T>(), x.shape());
  const T* px = x.data<T>();
  T* po = result.data<T>();
  const int64_t rows = x.numel() / n;
#pragma omp parallel for schedule(static) if (x.numel() > kParallelWork)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = px + r * n;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < n; ++i) mean += double(xr[i]);
      mean /= double(n);
    }
    for (int64_t i = 0; i < n; ++i) var += (double(xr[i]) - mean) * (double(xr[i]) - mean);
    const double inv = 1.0 / std::sqrt(var / double(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      T y = T((double(xr[i]) - mean) * inv);
      if (gamma) y = y * at_or_zero<T>(gamma, i) + at_or_zero<T>(beta, i);
      po[r * n + i] = y;
    }
  }
  return result;
}

template <class T>
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  Tensor result = Tensor::uninitialized(dtype_of<T>(), x.shape());
  if constexpr (std::is_same_v<T, float>)
    if (tanh_approximation) {
      gelu_tanh_values(x.data<float>(), x.numel(), result.data<float>());
      return result;
    }
  const T* px = x.data<T>();
  T* po = result.data<T>();
  const T half = T(0.5), one = T(1), inv_sqrt2 = T(1 / std::sqrt(2.0)),
          sqrt_2_over_pi = T(std::sqrt(2 / M_PI)), cubic = T(0.044715);
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelWork)
  for (int64_t i = 0; i < n; ++i) {
    const T v = px[i];
    po[i] = tanh_approximation
                ? half * v * (one + std::tanh(sqrt_2_over_pi * (v + cubic * v * v * v)))
                : half * v * (one + std::erf(v * inv_sqrt2));
  }
  return result;
}

template <class T>
T apply(BinaryOp op, T x, T y) {
  return op == BinaryOp::kAdd   ? x + y
         : op == BinaryOp::kSub ? x - y
         : op == BinaryOp::kMul ? x * y
                                : x / y;
}

// Operands of one shape: element by element, in any layout (a channels-last plan's adds).
template <class T>
Tensor elementwise_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor result = Tensor::uninitialized(dtype_of<T>(), a.shape());
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T* po = result.data<T>();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) po[i] = apply(op, pa[i], pb[i]);
  return result;
}

template <class T>
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out_shape) {
  if (a.shape() == b.shape()) return elementwise_binary<T>(op, a, b);
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const std::vector<int64_t> sa = broadcast_strides(a.shape(), out_shape),
                             sb = broadcast_strides(b.shape(), out_shape);
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T* po = result.data<T>();
  // A row of the last axis at a time: each operand's offset found once per row, then stepped by
  // its stride along the row (0 where it is broadcast).
  const int rank = int(out_shape.size());
  const int64_t width = rank > 0 ? out_shape.back() : 1,
                rows = result.numel() / std::max<int64_t>(width, 1);
  const int64_t step_a = rank > 0 ? sa.back() : 0, step_b = rank > 0 ? sb.back() : 0;
#pragma omp parallel for schedule(static) if (result.numel() >= kParallelWork)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t ia = 0, ib = 0;
    for (int64_t d = rank - 2, rest = row; d >= 0; --d) {
      const int64_t i = rest % out_shape[std::size_t(d)];
      rest /= out_shape[std::size_t(d)];
      ia += i * sa[std::size_t(d)];
      ib += i * sb[std::size_t(d)];
    }
    T* out = po + row * width;
    for (int64_t j = 0; j < width; ++j)
      out[j] = apply(op, pa[ia + j * step_a], pb[ib + j * step_b]);
  }
  return result;
}

// Elements before, along and after `axis` of `shape`.
void split_at(const Shape& shape, int axis, int64_t& outer, int64_t& along, int64_t& inner) {
  outer = along = inner = 1;
  for (int i = 0; i < int(shape.size()); ++i)
    (i < axis ? outer : i == axis ? along : inner) *= shape[std::size_t(i)];
}

int axis_of(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

template <class T>
Tensor concat(const std::vector<const Tensor*>& xs, int axis, const Shape& out_shape) {
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  axis = axis_of(axis, int(out_shape.size()));
  int64_t outer, along, inner;
  split_at(out_shape, axis, outer, along, inner);
  T* po = result.data<T>();
  int64_t offset = 0;  // along the axis
  for (const Tensor* x : xs) {
    const int64_t n = x->dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy(x->data<T>() + o * n, x->data<T>() + (o + 1) * n,
                po + o * along * inner + offset * inner);
    offset += x->dim(axis);
  }
  return result;
}

template <class T>
Tensor slice(const Tensor& x, int axis, int64_t begin, const Shape& out_shape,
             const FaultSet& faults) {
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  axis = axis_of(axis, x.rank());
  int64_t outer, along, inner;
  split_at(x.shape(), axis, outer, along, inner);
  // The faults: a half taken along the last axis (GEGLU's chunk) or the batch (guidance's) is
  // the other half.
  const bool half = 2 * out_shape[std::size_t(axis)] == along;
  if (half && ((axis == x.rank() - 1 && faults.has(Fault::kGegluSwap)) ||
               (axis == 0 && faults.has(Fault::kCfgHalvesSwapped))))
    begin = (begin + along / 2) % along;
  const int64_t n = out_shape[std::size_t(axis)] * inner;
  for (int64_t o = 0; o < outer; ++o)
    std::copy(x.data<T>() + (o * along + begin) * inner,
              x.data<T>() + (o * along + begin) * inner + n, result.data<T>() + o * n);
  return result;
}

template <class T>
Tensor permute(const Tensor& x, const std::vector<int64_t>& order, const Shape& out_shape) {
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const int rank = x.rank();
  std::vector<int64_t> in_strides(std::size_t(rank), 1);
  for (int d = rank - 2; d >= 0; --d)
    in_strides[std::size_t(d)] = in_strides[std::size_t(d) + 1] * x.dim(d + 1);
  std::vector<int64_t> index(std::size_t(rank), 0);
  const T* px = x.data<T>();
  T* po = result.data<T>();
  for (int64_t i = 0; i < result.numel(); ++i) {
    int64_t src = 0;
    for (int d = 0; d < rank; ++d)
      src += index[std::size_t(d)] * in_strides[std::size_t(order[std::size_t(d)])];
    po[i] = px[src];
    for (int d = rank - 1; d >= 0 && ++index[std::size_t(d)] == out_shape[std::size_t(d)]; --d)
      index[std::size_t(d)] = 0;
  }
  return result;
}

// The sinusoid in float32 whatever T is (as diffusers computes it), in its own loop order.
template <class T>
Tensor timestep_embedding(const Tensor& timesteps, const OpAttrs& a, const Shape& out_shape,
                          bool swap_sin_cos) {
  const int64_t dim = a.embedding_dim, half = dim / 2;
  const bool sin_second = a.flip_sin_to_cos != swap_sin_cos;
  Tensor result(dtype_of<T>(), out_shape);  // zeros: an odd dim's last column
  const float step = float(-std::log(10000.0)), denom = float(double(half) - a.shift);
  const T* pt = timesteps.data<T>();
  T* po = result.data<T>();
  for (int64_t i = 0; i < half; ++i) {
    const float freq = std::exp(step * float(i) / denom);
    for (int64_t r = 0; r < timesteps.numel(); ++r) {
      const float arg = float(pt[r]) * freq;
      po[r * dim + (sin_second ? half : 0) + i] = T(std::sin(arg));
      po[r * dim + (sin_second ? 0 : half) + i] = T(std::cos(arg));
    }
  }
  return result;
}

// Nearest resize of the trailing spatial axes to out_shape's: PyTorch's source index, the
// float32 ratio in/out, exact halving when out is twice in.
template <class T>
Tensor interpolate_nearest(const Tensor& x, const Shape& out_shape) {
  const int spatial = x.rank() - 2;
  std::vector<std::vector<int64_t>> source(static_cast<std::size_t>(spatial));
  for (int i = 0; i < spatial; ++i) {
    const int64_t in = x.dim(2 + i), out = out_shape[std::size_t(i) + 2];
    const float ratio = float(in) / float(out);
    for (int64_t d = 0; d < out; ++d)
      source[std::size_t(i)].push_back(
          out == in       ? d
          : out == 2 * in ? d / 2
                          : std::min(int64_t(std::floor(float(d) * ratio)), in - 1));
  }
  Tensor result = Tensor::uninitialized(dtype_of<T>(), out_shape);
  const T* px = x.data<T>();
  T* po = result.data<T>();
  const int64_t in_plane = shape_numel(x.shape()) / (x.dim(0) * x.dim(1));
  const int64_t out_plane = result.numel() / (x.dim(0) * x.dim(1));
  for (int64_t p = 0; p < x.dim(0) * x.dim(1); ++p)
    for (int64_t o = 0; o < out_plane; ++o) {
      int64_t src = 0, rest = o, in_stride = 1;
      for (int i = spatial - 1; i >= 0; --i) {
        const int64_t out_i = out_shape[std::size_t(i) + 2];
        src += source[std::size_t(i)][std::size_t(rest % out_i)] * in_stride;
        rest /= out_i;
        in_stride *= x.dim(2 + i);
      }
      po[p * out_plane + o] = px[p * in_plane + src];
    }
  return result;
}

// x + a stored parameter (a modulation table), broadcast.
template <class T>
Tensor add_parameter(const Tensor& x, const PreparedParam& p, const Shape& out_shape) {
  Tensor t = Tensor::uninitialized(dtype_of<T>(), p.shape);
  std::transform(p.values.begin(), p.values.end(), t.data<T>(), [](float v) { return T(v); });
  return binary<T>(BinaryOp::kAdd, x, t, out_shape);
}

// Tokens [B,S,(pt,ph,pw,C)] back to [B,C,F*pt,H*ph,W*pw]: diffusers' reshape, permute and
// flattens.
template <class T>
Tensor unpatchify(const Tensor& x, const Shape& grid, const OpAttrs& a, const Shape& out_shape) {
  const std::size_t g = grid.size() - 3;
  const Shape split{x.dim(0),  grid[g],   grid[g + 1], grid[g + 2],
                    a.dims[0], a.dims[1], a.dims[2],   out_shape[1]};
  const std::vector<int64_t> order{0, 7, 1, 4, 2, 5, 3, 6};
  Shape moved;
  for (int64_t d : order) moved.push_back(split[std::size_t(d)]);
  return permute<T>(x.reshaped(split), order, moved).reshaped(out_shape);
}

}  // namespace

template <class T>
Tensor nd_op(const Op& op, const std::vector<const Tensor*>& in, const ParamLookup& param,
             const Shape& out_shape, const FaultSet& faults, DType attention_operands,
             DType activation) {
  const OpAttrs& a = op.attrs;
  const Tensor& x = *in[0];
  auto optional = [&](const std::string& key) { return key.empty() ? nullptr : param(key); };
  switch (op.kind) {
    case OpKind::kConv:
      return conv_nd<T>(x, *param(op.weight), optional(op.bias), a, out_shape);
    case OpKind::kLinearLast:
      if constexpr (std::is_same_v<T, float>)
        return linear_last_gemm(x, *param(op.weight), optional(op.bias), out_shape);
      return linear_last<T>(x, *param(op.weight), optional(op.bias), out_shape);
    case OpKind::kMultiHeadAttention: {
      const OpAttrs r = resolved_attention(op, in.size() > 3 ? &in[3]->shape() : nullptr);
      const Tensor* mask = attention_has_mask(op) ? in[3] : nullptr;
      if constexpr (std::is_same_v<T, float>)
        return multi_head_attention_gemm(
            x, *in[1], *in[2], mask, r, faults.has(Fault::kCrossAttentionQueryLength),
            attention_operands, faults.has(Fault::kSoftmaxNoMax), activation);
      return multi_head_attention<T>(x, *in[1], *in[2], mask, r,
                                     faults.has(Fault::kCrossAttentionQueryLength));
    }
    case OpKind::kLayerNorm: {
      int64_t n = 1;
      for (int i = x.rank() - a.norm_dims; i < x.rank(); ++i) n *= x.dim(i);
      return normalize<T>(x, n, optional(op.weight), optional(op.bias), a.eps, false);
    }
    case OpKind::kRmsNorm:
      return normalize<T>(x, x.shape().back(), optional(op.weight), nullptr, a.eps, true);
    case OpKind::kGelu:
      return gelu<T>(x, a.tanh_approximation);
    case OpKind::kConcat:
      return concat<T>(in, a.axis, out_shape);
    case OpKind::kSlice:
      return slice<T>(x, a.axis, a.begin, out_shape, faults);
    case OpKind::kReshape:  // row-major: the same elements in the same order
      return x.reshaped(out_shape);
    case OpKind::kTimestepEmbedding:
      return timestep_embedding<T>(x, a, out_shape, faults.has(Fault::kTimestepSinCosSwap));
    case OpKind::kInterpolateNearest:
      return interpolate_nearest<T>(x, out_shape);
    case OpKind::kPermute:
      return permute<T>(x, a.dims, out_shape);
    case OpKind::kBinary:
      return binary<T>(a.binary, x, *in[1], out_shape);
    case OpKind::kAddParameter:
      return add_parameter<T>(x, *param(op.weight), out_shape);
    case OpKind::kRotaryEmbedding:
      return rotary_embedding<T>(x, in[1]->shape(), a);
    case OpKind::kUnpatchify:
      return unpatchify<T>(x, in[1]->shape(), a, out_shape);
    default:
      break;
  }
  TP_CHECK(false, std::string("not an N-dimensional op: ") + op_kind_name(op.kind));
  return Tensor();
}

template Tensor nd_op<float>(const Op&, const std::vector<const Tensor*>&, const ParamLookup&,
                             const Shape&, const FaultSet&, DType, DType);
template Tensor nd_op<double>(const Op&, const std::vector<const Tensor*>&, const ParamLookup&,
                              const Shape&, const FaultSet&, DType, DType);

}  // namespace tp::compiled::emulated
