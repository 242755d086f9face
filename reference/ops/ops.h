// Reference ops: fp32 / fp64 CPU implementations of every graph op (T = float or double).
// Tensors are NCHW, row-major. Weights arrive already in T. Elementwise math and statistics
// run in double and round once to T, so the fp32 reference's error is storage rounding and
// GEMM accumulation only.
#pragma once

#include "harness/core/graph.h"
#include "harness/core/tensor.h"

namespace tp::ref {

// Output spatial size of a conv along one axis; <= 0 when the input is too small.
inline int64_t conv_out_size(int64_t in, int pad_lo, int pad_hi, int64_t kernel, int stride) {
  const int64_t span = in + pad_lo + pad_hi - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

// The fast path of conv() for a [B,C,H,W] conv that conv2d_window() takes.
template <class T>
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor* bias, const Conv2dWindow& a);
template <class T>
Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, double eps);
template <class T>
Tensor upsample_nearest2x(const Tensor& x);
template <class T>
Tensor elementwise(OpKind kind, const Tensor& x, const OpAttrs& a);  // unary ops

// N-dimensional ops (conv.cpp, token_ops.cpp, shape_ops.cpp, elementwise.cpp).
template <class T>
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, const OpAttrs& a);
template <class T>
Tensor linear_last(const Tensor& x, const Tensor& weight, const Tensor* bias);
template <class T>
Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                            const OpAttrs& a);
template <class T>
Tensor layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, int norm_dims,
                  double eps);
template <class T>
Tensor rms_norm(const Tensor& x, const Tensor* gamma, double eps);
template <class T>
Tensor gelu(const Tensor& x, bool tanh_approximation);
template <class T>
Tensor concat(const std::vector<const Tensor*>& xs, int axis);
template <class T>
Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end);
template <class T>
Tensor permute(const Tensor& x, const std::vector<int64_t>& order);
template <class T>
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);

// diffusers' timestep sinusoid (get_timestep_embedding), computed in float32 whatever T is, as
// diffusers does, then widened or kept: [...] -> [..., attrs.embedding_dim].
template <class T>
Tensor timestep_embedding(const Tensor& timesteps, const OpAttrs& attrs);
// F.interpolate(mode="nearest", size=the trailing spatial sizes of `like`, a shape) over
// x [B,C,*S].
template <class T>
Tensor interpolate_nearest(const Tensor& x, const Shape& like);
// RoPE (OpKind::kRotaryEmbedding) on x [B,S,heads*Dh] over the token grid of `grid`'s trailing
// 3 axes, and unpatchify (OpKind::kUnpatchify) of x [B,S,P*C] on that grid.
template <class T>
Tensor rotary_embedding(const Tensor& x, const Shape& grid, const OpAttrs& attrs);
template <class T>
Tensor unpatchify(const Tensor& x, const Shape& grid, const OpAttrs& attrs);

}  // namespace tp::ref
