// The two ops diffusion models add to the IR: the timestep sinusoid and nearest-neighbour
// resizing to another tensor's size (a UNet's upsampler on odd latent sizes).
#include <cmath>

#include "reference/ops/ops.h"

namespace tp::ref {

template <class T>
Tensor timestep_embedding(const Tensor& timesteps, const OpAttrs& a) {
  const int64_t dim = a.embedding_dim, half = dim / 2, n = timesteps.numel();
  // Every step in float32, in diffusers' order: exponent = -ln(10000) * i / (half - shift),
  // freq = exp(exponent), arg = t * freq, [sin | cos] (or [cos | sin]), a zero column if odd.
  std::vector<float> freq(static_cast<std::size_t>(half));
  const float neg_log = float(-std::log(10000.0)), denom = float(double(half) - a.shift);
  for (int64_t i = 0; i < half; ++i) freq[std::size_t(i)] = std::exp(neg_log * float(i) / denom);
  Shape shape = timesteps.shape();
  shape.push_back(dim);
  Tensor out(dtype_of<T>(), shape);  // zero-filled: the odd dim's pad column
  const Tensor t32 = timesteps.to(DType::kF32);
  T* po = out.data<T>();
  for (int64_t r = 0; r < n; ++r) {
    const float t = t32.data<float>()[r];
    for (int64_t i = 0; i < half; ++i) {
      const float arg = t * freq[std::size_t(i)];
      const float s = std::sin(arg), c = std::cos(arg);
      po[r * dim + i] = T(a.flip_sin_to_cos ? c : s);
      po[r * dim + half + i] = T(a.flip_sin_to_cos ? s : c);
    }
  }
  return out;
}

namespace {

// PyTorch's nearest source index (UpSample.h nearest_idx).
int64_t nearest_source(int64_t dst, int64_t in, int64_t out) {
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const float scale = float(in) / float(out);
  return std::min(int64_t(std::floor(float(dst) * scale)), in - 1);
}

}  // namespace

template <class T>
Tensor interpolate_nearest(const Tensor& x, const Shape& like) {
  const int spatial = x.rank() - 2;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  Shape shape{x.dim(0), x.dim(1)};
  for (int i = 0; i < spatial; ++i) {
    in[3 - spatial + i] = x.dim(2 + i);
    out[3 - spatial + i] = like[like.size() - std::size_t(spatial) + std::size_t(i)];
    shape.push_back(out[3 - spatial + i]);
  }
  Tensor result = Tensor::uninitialized(dtype_of<T>(), shape);
  const T* px = x.data<T>();
  T* po = result.data<T>();
  const int64_t planes = x.dim(0) * x.dim(1);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t z = 0; z < out[0]; ++z)
      for (int64_t y = 0; y < out[1]; ++y)
        for (int64_t w = 0; w < out[2]; ++w) {
          const int64_t sz = nearest_source(z, in[0], out[0]),
                        sy = nearest_source(y, in[1], out[1]),
                        sx = nearest_source(w, in[2], out[2]);
          po[((p * out[0] + z) * out[1] + y) * out[2] + w] =
              px[((p * in[0] + sz) * in[1] + sy) * in[2] + sx];
        }
  return result;
}

template Tensor timestep_embedding<float>(const Tensor&, const OpAttrs&);
template Tensor timestep_embedding<double>(const Tensor&, const OpAttrs&);
template Tensor interpolate_nearest<float>(const Tensor&, const Shape&);
template Tensor interpolate_nearest<double>(const Tensor&, const Shape&);

}  // namespace tp::ref
