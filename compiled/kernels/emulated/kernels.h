// The compiled path's CPU kernels, following the numerics contract exactly: fp32 math, fp32
// accumulation (f16 only under acc=f16), weights as stored (decoded exactly, fp8 scales applied
// to the fp32 accumulator), and rounding only where the executor stores a group's output.
// Activations inside a group are fp32 channels-last tensors [B, H, W, C].
#pragma once

#include <functional>
#include <vector>

#include "compiled/faults.h"
#include "compiled/prepared_weights.h"
#include "harness/core/graph.h"
#include "harness/core/tensor.h"

namespace tp::compiled::emulated {

// Scale (fp8) and bias of output channel `o`, applied to an accumulated dot product.
template <class T>
T finish(T acc, const PreparedParam& w, const PreparedParam* bias, int64_t o) {
  if (!w.scales.empty()) acc = acc * T(w.scales[std::size_t(o)]);
  return bias ? acc + T(bias->values[std::size_t(o)]) : acc;
}

// An N-d conv of x [B, Cin, *S] (1 to 3 spatial axes) with weights stored [Cout][*K][Cin/groups]
// (nd_conv.cpp): T is float (a GEMM) or double (loops).
template <class T>
Tensor conv_nd(const Tensor& x, const PreparedParam& w, const PreparedParam* bias, const OpAttrs& a,
               const Shape& out_shape);

// The softmax of one row of n scores in place, in fp32, as the CUDA kernels compute it: x_j =
// s_j * scale (+ mask_j) for the `seen` keys a query sees (the others weigh 0), the row max
// subtracted (not under `no_max`, the softmax-no-max fault, whose exp(x) is held in
// `activation`), portable_expf, the sum over 16 interleaved lanes added in a fixed order, each
// weight times the sum's reciprocal, rounded to `operands` (attn=act).
struct SoftmaxRow {
  float scale;
  bool no_max;
  DType activation, operands;
};
void softmax_row(float* s, const float* mask, int64_t seen, int64_t n, const SoftmaxRow& f);

enum class Upsample : uint8_t { kNone, kNearest2x, kNearest2xOffByOne };

// conv2d (and linear, as a 1x1 conv) over an NHWC input, optionally read through a nearest 2x
// upsample that is never materialized; out = (sum_k x*w) * scale[c] + bias[c].
Tensor conv2d(const Tensor& x, const PreparedParam& weight, const PreparedParam* bias,
              const Conv2dWindow& window, Upsample upsample, DType accumulation);
// out[M,N] = a[M,K] * w[N,K]^T, accumulating in f32 (sgemm) or, for acc=f16, rounding every
// multiply-add to f16 in k order.
void gemm_nt(const float* a, const float* w, int64_t m, int64_t n, int64_t k, DType accumulation,
             float* out);

// GroupNorm with statistics over (pixels, channels of the group), two passes in double as the
// contract says (`one_pass` kF64); kF16 or kF32 are the groupnorm-f16-accum and
// groupnorm-one-pass faults: one sequential pass, var = E[x^2] - E[x]^2, every add rounded to it.
// `vector_tail`: the groupnorm-vector-tail fault (compiled/faults.h). x is channels-last
// [B, H, W, C], or with `planar` [B, C, *spatial]: the same sums in the same order either way.
Tensor group_norm(const Tensor& x, const PreparedParam& gamma, const PreparedParam& beta,
                  int groups, double eps, DType one_pass = DType::kF64, bool vector_tail = false,
                  bool planar = false);

// softmax(q k^T * scale) v per batch, blocked over queries so N x N scores never exist. With
// `no_max` (the softmax-no-max fault) exp(s) is taken without subtracting the row max and held
// in `activation` before the P*V product. `operands` (LayerPolicy::attention_operands(), attn=):
// f16/bf16 rounds q, k, v and the normalized softmax weights P to it before the products; f32
// keeps them.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool no_max,
                 DType activation, DType operands = DType::kF32);

Tensor upsample_nearest2x(const Tensor& x);
Tensor pointwise(OpKind kind, const OpAttrs& attrs, Tensor x);  // unary ops, in place on x
// SiLU with every step rounded to `dt` (the silu-in-activation-dtype fault), in place on x.
Tensor silu_rounded_to(DType dt, Tensor x);
Tensor slice_channels(const Tensor& x, int begin, int end);

// The N-dimensional ops (kConv onwards), one op at a time, on row-major tensors in their logical
// shapes, computing in T (float on the compiled path; double in the tests against LibTorch's fp64).
// `in` holds the op's inputs (dtype_of<T>); `param` finds a prepared parameter by key;
// `out_shape` is the op's output shape (harness/core/shapes.h). `faults` are the deliberate bugs
// the N-d kernels carry (cross-attention-query-length, geglu-swap, timestep-sin-cos-swap,
// cfg-halves-swapped).
using ParamLookup = std::function<const PreparedParam*(const std::string& key)>;
// `attention_operands`: multi-head attention's q, k, v and P rounded to it (attn=act; float only);
// `activation`: the dtype the softmax-no-max fault holds exp(s) in (float only).
// RoPE on x [B,S,heads*Dh] over the token grid of `grid`'s trailing 3 axes (rotary.cpp).
template <class T>
Tensor rotary_embedding(const Tensor& x, const Shape& grid, const OpAttrs& attrs);

template <class T>
Tensor nd_op(const Op& op, const std::vector<const Tensor*>& in, const ParamLookup& param,
             const Shape& out_shape, const FaultSet& faults = {},
             DType attention_operands = DType::kF32, DType activation = DType::kF32);

// Rounds n fp32 values into `dt` storage (f32, f16, bf16), and reads them back.
void store_rounded(const float* src, int64_t n, DType dt, void* dst);
// The same, rounding toward zero instead (the f16/bf16-store-truncate faults).
void store_rounded(const float* src, int64_t n, DType dt, void* dst, bool truncate);
void load_f32(const void* src, DType dt, int64_t n, float* dst);
float round_to(DType dt, float x);

// exp in fp32 with the same bits on every x86 the project builds for (scalar, AVX2 and AVX-512
// forms do the same operations in the same order): within 2 ulp of exp, 0 below -104, inf above
// 89, NaN kept. SiLU uses it, so a baseline made on one CPU holds on another (glibc's vector expf
// and its scalar expf differ in the last bit on some inputs).
float portable_expf(float x);
// portable_expf over n values in place, a vector at a time (on the calling thread).
void portable_expf_in_place(float* p, int64_t n);
// GELU's tanh form, 0.5 x (1 + tanh z) with z = sqrt(2/pi) (x + 0.044715 x^3), over n values
// as x / (1 + portable_expf(-2z)) (no cancellation where tanh z nears -1): the same bits on every
// x86 the project builds for.
void gelu_tanh_values(const float* x, int64_t n, float* y);

// An fp32 tensor as an attention operand: itself under f32, else a copy rounded to `dt` (f16,
// bf16), element by element to nearest even.
class RoundedOperand {
 public:
  RoundedOperand(const Tensor& t, DType dt);
  const Tensor& get() const { return copied_ ? rounded_ : *t_; }

 private:
  const Tensor* t_;
  bool copied_ = false;
  Tensor rounded_;
};

}  // namespace tp::compiled::emulated
