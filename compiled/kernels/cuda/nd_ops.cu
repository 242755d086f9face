// The N-dimensional ops on the device (kernels.h): layout changes, broadcast binaries, concat and
// slice copies, N-d conv patches, LayerNorm/RMSNorm with double statistics, multi-head attention
// with an online softmax over key tiles, the timestep sinusoid and nearest resize. All compute in
// fp32 (norm statistics in double), as the emulation's nd_ops.cpp does.
#include <cfloat>

#include "compiled/kernels/cuda/device_io.cuh"

namespace tp::compiled::cuda {
namespace {

__global__ void transpose_kernel(Src x, int64_t b, int64_t c, int64_t plane, bool to_last,
                                 float* out) {
  TP_GRID_STRIDE(i, b * c * plane) {
    // i indexes the output; (n, ch, p) its coordinates.
    int64_t n, ch, p;
    if (to_last) {
      ch = i % c;
      p = (i / c) % plane;
      n = i / (c * plane);
      out[i] = load(x, (n * c + ch) * plane + p);
    } else {
      p = i % plane;
      ch = (i / plane) % c;
      n = i / (c * plane);
      out[i] = load(x, (n * plane + p) * c + ch);
    }
  }
}

__device__ __forceinline__ int64_t source_offset(const Strides& s, int64_t i) {
  int64_t offset = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    offset += (i % s.dims[d]) * s.strides[d];
    i /= s.dims[d];
  }
  return offset;
}

__global__ void gather_kernel(Src x, Strides s, int64_t n, float* out) {
  TP_GRID_STRIDE(i, n) out[i] = load(x, source_offset(s, i));
}

__global__ void binary_kernel(Binary op, Src a, Strides sa, Src b, Strides sb, int64_t n,
                              float* out) {
  TP_GRID_STRIDE(i, n) {
    const float x = load(a, source_offset(sa, i)), y = load(b, source_offset(sb, i));
    out[i] = op == Binary::kAdd   ? x + y
             : op == Binary::kSub ? x - y
             : op == Binary::kMul ? x * y
                                  : x / y;
  }
}

__global__ void copy_blocks_kernel(Src x, int64_t outer, int64_t width, int64_t x_stride,
                                   int64_t x_offset, float* out, int64_t out_stride,
                                   int64_t out_offset) {
  TP_GRID_STRIDE(i, outer * width) {
    const int64_t o = i / width, j = i % width;
    out[out_offset + o * out_stride + j] = load(x, x_offset + o * x_stride + j);
  }
}

__global__ void im2col_nd_kernel(Src x, ConvNd g, int64_t n, int64_t group, int64_t p0,
                                 int64_t rows, Storage out_storage, void* patches) {
  const int64_t taps = g.taps(), width = taps * g.cin_g;
  TP_GRID_STRIDE(i, rows * width) {
    const int64_t r = i / width, t = (i % width) / g.cin_g, c = i % g.cin_g;
    const int64_t p = p0 + r;
    const int64_t oz = p / (g.out[1] * g.out[2]), oy = p / g.out[2] % g.out[1], ox = p % g.out[2];
    int64_t iz = oz * g.stride[0] + t / (g.k[1] * g.k[2]) * g.dil[0] - g.lo[0];
    int64_t iy = oy * g.stride[1] + t / g.k[2] % g.k[1] * g.dil[1] - g.lo[1];
    int64_t ix = ox * g.stride[2] + t % g.k[2] * g.dil[2] - g.lo[2];
    const bool inside =
        iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
    float v = 0.0f;
    if (inside || g.replicate) {
      iz = min(max(iz, int64_t(0)), g.in[0] - 1);
      iy = min(max(iy, int64_t(0)), g.in[1] - 1);
      ix = min(max(ix, int64_t(0)), g.in[2] - 1);
      const int64_t channel = group * g.cin_g + c;
      v = load(x, (n * g.cin + channel) * g.in_plane() + (iz * g.in[1] + iy) * g.in[2] + ix);
    }
    store(patches, out_storage, i, v);  // exact: the source's own dtype or wider
  }
}

__global__ void layer_norm_kernel(Src x, int64_t n, double eps, bool rms, const float* gamma,
                                  const float* beta, float* out) {
  const int64_t row = blockIdx.x, base = row * n;
  double mean = 0;
  if (!rms) {
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += double(load(x, base + i));
    mean = block_sum(s) / double(n);
  }
  double ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = double(load(x, base + i)) - mean;
    ss += d * d;
  }
  const double inv = 1.0 / sqrt(block_sum(ss) / double(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float y = float((double(load(x, base + i)) - mean) * inv);
    if (gamma) y = y * gamma[i] + (beta ? beta[i] : 0.0f);
    out[base + i] = y;
  }
}

// One thread per query row of one (batch, head); the block's threads share tiles of keys and
// values in shared memory. Running max m, sum l and the weighted values acc (Dv wide) are
// rescaled when the max grows, the FlashAttention recurrence in fp32.
constexpr int kQueriesPerBlock = 64;

template <int kDim>
__global__ void attention_kernel(const float* q, const float* k, const float* v, const float* mask,
                                 AttentionShape s, float* out) {
  constexpr int kKeysPerTile = (kDim <= 64 ? 64 : kDim <= 128 ? 32 : 16);
  __shared__ float tile_k[kKeysPerTile * kDim];
  __shared__ float tile_v[kKeysPerTile * kDim];
  const int64_t bh = blockIdx.y, b = bh / s.heads, h = bh % s.heads;
  const int64_t i = int64_t(blockIdx.x) * kQueriesPerBlock + threadIdx.x;
  const bool active = i < s.queries;
  const int64_t dq_all = s.heads * s.dh, dv_all = s.heads * s.dv;
  float qi[kDim], acc[kDim];
  for (int d = 0; d < kDim; ++d) {
    qi[d] = active && d < s.dh ? q[(b * s.queries + i) * dq_all + h * s.dh + d] : 0.0f;
    acc[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = 0; j0 < s.keys; j0 += kKeysPerTile) {
    const int64_t tile = min(int64_t(kKeysPerTile), s.keys - j0);
    __syncthreads();  // the previous tile's readers are done
    for (int64_t e = threadIdx.x; e < tile * s.dh; e += blockDim.x) {
      const int64_t j = e / s.dh, d = e % s.dh;
      tile_k[j * kDim + d] = k[(b * s.stored_keys + j0 + j) * dq_all + h * s.dh + d];
    }
    for (int64_t e = threadIdx.x; e < tile * s.dv; e += blockDim.x) {
      const int64_t j = e / s.dv, d = e % s.dv;
      tile_v[j * kDim + d] = v[(b * s.stored_keys + j0 + j) * dv_all + h * s.dv + d];
    }
    __syncthreads();
    if (!active) continue;
    for (int64_t j = 0; j < tile; ++j) {
      const int64_t key = j0 + j;
      if (s.frame_tokens > 0 && key / s.frame_tokens > i / s.frame_tokens) continue;
      float dot = 0.0f;
      for (int d = 0; d < kDim; ++d)
        if (d < s.dh) dot += qi[d] * tile_k[j * kDim + d];
      float score = dot * s.scale;
      if (mask) score += mask[b * s.mask_batch + i * s.stored_keys + key];
      if (score == -INFINITY) continue;  // weight 0
      if (s.no_max) {                    // the fault: a naive kernel's exp(s), held in 16 bits
        const float p = round_to(s.activation, expf(score));
        l += p;
        for (int d = 0; d < kDim; ++d)
          if (d < s.dv) acc[d] += p * tile_v[j * kDim + d];
        continue;
      }
      const float m_new = fmaxf(m, score);
      const float correction = expf(m - m_new), p = expf(score - m_new);
      l = l * correction + p;
      for (int d = 0; d < kDim; ++d)
        if (d < s.dv) acc[d] = acc[d] * correction + p * tile_v[j * kDim + d];
      m = m_new;
    }
  }
  if (!active) return;
  const float inv = 1.0f / l;
  for (int d = 0; d < kDim; ++d)
    if (d < s.dv) out[(b * s.queries + i) * dv_all + h * s.dv + d] = acc[d] * inv;
}

__global__ void timestep_kernel(Src t, int64_t n, int64_t dim, bool sin_first, float step,
                                float denominator, float* out) {
  const int64_t half = dim / 2;
  TP_GRID_STRIDE(e, n * dim) {
    const int64_t r = e / dim, col = e % dim;
    float value = 0.0f;  // an odd dim's last column
    if (col < 2 * half) {
      const int64_t f = col % half;
      const bool first_half = col < half;
      const float freq = expf(step * float(f) / denominator);
      const float arg = load(t, r) * freq;
      value = (first_half == sin_first) ? sinf(arg) : cosf(arg);
    }
    out[e] = value;
  }
}

__device__ int64_t nearest_source(const Resize& r, int axis, int64_t o) {
  const int64_t in = r.in[axis], out = r.out[axis];
  if (out == in) return o;
  if (out == 2 * in) return o / 2;
  // __fmul_rn: one rounded multiply, never contracted, as on the host.
  return min(int64_t(floorf(__fmul_rn(float(o), r.ratio[axis]))), in - 1);
}

__global__ void resize_kernel(Src x, Resize r, int64_t n, float* out) {
  const int64_t in_plane = r.in[0] * r.in[1] * r.in[2], out_plane = r.out[0] * r.out[1] * r.out[2];
  TP_GRID_STRIDE(e, n) {
    const int64_t p = e / out_plane, o = e % out_plane;
    const int64_t z = o / (r.out[1] * r.out[2]), y = o / r.out[2] % r.out[1], xx = o % r.out[2];
    const int64_t sz = nearest_source(r, 0, z), sy = nearest_source(r, 1, y),
                  sx = nearest_source(r, 2, xx);
    out[e] = load(x, p * in_plane + (sz * r.in[1] + sy) * r.in[2] + sx);
  }
}

int64_t count(const Strides& s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; ++d) n *= s.dims[d];
  return n;
}

__global__ void rotary_kernel(Src x, Rotary r, int64_t n, float* out) {
  TP_GRID_STRIDE(i, n) {  // i: one pair of one head of one row
    const int64_t pair = i % r.pairs;
    const int64_t token = i / (r.pairs * r.heads) % (r.grid[0] * r.grid[1] * r.grid[2]);
    int axis = 0;
    int64_t k = pair;
    while (axis < 2 && k >= r.shares[axis] / 2) k -= r.shares[axis++] / 2;
    const int64_t position = axis == 0   ? token / (r.grid[1] * r.grid[2])
                             : axis == 1 ? token / r.grid[2] % r.grid[1]
                                         : token % r.grid[2];
    const double inverse = 1.0 / pow(r.theta, double(2 * k) / double(r.shares[axis]));
    const double angle = double(position) * inverse;
    const float c = float(cos(angle)), s = float(sin(angle));
    const float x1 = load(x, 2 * i), x2 = load(x, 2 * i + 1);
    // Rounded as the emulation computes them: no fused multiply-adds.
    out[2 * i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    out[2 * i + 1] = __fadd_rn(__fmul_rn(x1, s), __fmul_rn(x2, c));
  }
}

}  // namespace

cudaError_t transpose_channels(Src x, int64_t b, int64_t c, int64_t plane, bool to_last, float* out,
                               cudaStream_t stream) {
  transpose_kernel<<<blocks_for(b * c * plane), kThreads, 0, stream>>>(x, b, c, plane, to_last,
                                                                       out);
  return cudaGetLastError();
}

cudaError_t gather(Src x, const Strides& s, float* out, cudaStream_t stream) {
  const int64_t n = count(s);
  gather_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, n, out);
  return cudaGetLastError();
}

cudaError_t binary(Binary op, Src a, const Strides& sa, Src b, const Strides& sb, float* out,
                   cudaStream_t stream) {
  const int64_t n = count(sa);
  binary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(op, a, sa, b, sb, n, out);
  return cudaGetLastError();
}

cudaError_t copy_blocks(Src x, int64_t outer, int64_t width, int64_t x_stride, int64_t x_offset,
                        float* out, int64_t out_stride, int64_t out_offset, cudaStream_t stream) {
  copy_blocks_kernel<<<blocks_for(outer * width), kThreads, 0, stream>>>(
      x, outer, width, x_stride, x_offset, out, out_stride, out_offset);
  return cudaGetLastError();
}

cudaError_t im2col_nd(Src x, const ConvNd& g, int64_t n, int64_t group, int64_t p0, int64_t rows,
                      Storage out, void* patches, cudaStream_t stream) {
  im2col_nd_kernel<<<blocks_for(rows * g.taps() * g.cin_g), kThreads, 0, stream>>>(
      x, g, n, group, p0, rows, out, patches);
  return cudaGetLastError();
}

cudaError_t layer_norm(Src x, int64_t rows, int64_t n, double eps, bool rms, const float* gamma,
                       const float* beta, float* out, cudaStream_t stream) {
  for (int64_t r0 = 0; r0 < rows; r0 += 65535) {  // grid.x limit per launch of row blocks
    const int64_t r = std::min<int64_t>(65535, rows - r0);
    const Src part{static_cast<const char*>(x.data) + r0 * n * (x.storage == Storage::kF32 ? 4 : 2),
                   x.storage};
    layer_norm_kernel<<<unsigned(r), kThreads, 0, stream>>>(part, n, eps, rms, gamma, beta,
                                                            out + r0 * n);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t multi_head_attention(const float* q, const float* k, const float* v, const float* mask,
                                 const AttentionShape& s, float* out, cudaStream_t stream) {
  const int64_t dim = std::max(s.dh, s.dv);
  if (dim > kMaxHeadDim || s.batch * s.heads > 65535) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((s.queries + kQueriesPerBlock - 1) / kQueriesPerBlock),
                  unsigned(s.batch * s.heads));
  if (dim <= 64)
    attention_kernel<64><<<grid, kQueriesPerBlock, 0, stream>>>(q, k, v, mask, s, out);
  else if (dim <= 128)
    attention_kernel<128><<<grid, kQueriesPerBlock, 0, stream>>>(q, k, v, mask, s, out);
  else
    attention_kernel<256><<<grid, kQueriesPerBlock, 0, stream>>>(q, k, v, mask, s, out);
  return cudaGetLastError();
}

cudaError_t timestep_embedding(Src timesteps, int64_t n, int64_t dim, bool sin_first,
                               float denominator, float* out, cudaStream_t stream) {
  const float step = float(-9.210340371976184);  // -log(10000), as the emulation rounds it
  timestep_kernel<<<blocks_for(n * dim), kThreads, 0, stream>>>(timesteps, n, dim, sin_first, step,
                                                                denominator, out);
  return cudaGetLastError();
}

cudaError_t rotary_embedding(Src x, const Rotary& r, int64_t rows, float* out,
                             cudaStream_t stream) {
  const int64_t n = rows * r.heads * r.pairs;
  rotary_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, r, n, out);
  return cudaGetLastError();
}

cudaError_t interpolate_nearest(Src x, const Resize& r, float* out, cudaStream_t stream) {
  const int64_t n = r.planes * r.out[0] * r.out[1] * r.out[2];
  resize_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, r, n, out);
  return cudaGetLastError();
}

}  // namespace tp::compiled::cuda
