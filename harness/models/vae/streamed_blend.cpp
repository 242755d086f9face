#include "harness/models/vae/streamed_blend.h"

#include <algorithm>
#include <cstring>

namespace tp {
namespace {

// A tile's output in fp32: `lead` planes (every axis before the last two) of h x w.
struct Tile {
  Shape lead;
  int64_t planes = 0, h = 0, w = 0;
  std::vector<float> v;
  float& at(int64_t n, int64_t y, int64_t x) { return v[std::size_t((n * h + y) * w + x)]; }
};

Tile to_tile(const Tensor& t) {
  const int r = t.rank();
  Tile out{Shape(t.shape().begin(), t.shape().end() - 2), 0, t.dim(r - 2), t.dim(r - 1), {}};
  out.planes = t.numel() / std::max<int64_t>(1, out.h * out.w);
  const Tensor f = t.to(DType::kF32);
  out.v.assign(f.data<float>(), f.data<float>() + f.numel());
  return out;
}

// x[..., y:y+size, xo:xo+size], clipped.
Tensor window(const Tensor& x, int64_t y, int64_t xo, int64_t size) {
  const int r = x.rank();
  const int64_t H = x.dim(r - 2), W = x.dim(r - 1), planes = x.numel() / (H * W);
  const int64_t h = std::min(size, H - y), w = std::min(size, W - xo);
  Shape s = x.shape();
  s[std::size_t(r - 2)] = h;
  s[std::size_t(r - 1)] = w;
  Tensor tile = Tensor::uninitialized(DType::kF32, s);
  for (int64_t n = 0; n < planes; ++n)
    for (int64_t q = 0; q < h; ++q)
      std::memcpy(tile.data<float>() + (n * h + q) * w, x.data<float>() + (n * H + y + q) * W + xo,
                  std::size_t(w) * sizeof(float));
  return tile;
}

float round_to(DType dt, float v) { return float(round_through(dt, v)); }

// b's first rows (vertical) or columns ramp from a's last ones, in place on b.
void blend_into(const Tile& a, Tile& b, int64_t blend, bool vertical, DType dt) {
  const int64_t e = std::min({vertical ? a.h : a.w, vertical ? b.h : b.w, blend});
  Tile& t = b;
  for (int64_t n = 0; n < t.planes; ++n)
    for (int64_t y = 0; y < (vertical ? e : t.h); ++y)
      for (int64_t q = 0; q < (vertical ? t.w : e); ++q) {
        const int64_t k = vertical ? y : q;
        const float wb = float(double(k) / double(e)), wa = float(1 - double(k) / double(e));
        const float av = vertical ? a.v[std::size_t((n * a.h + a.h - e + y) * a.w + q)]
                                  : a.v[std::size_t((n * a.h + y) * a.w + a.w - e + q)];
        t.at(n, y, q) = round_to(dt, av * wa + t.at(n, y, q) * wb);
      }
}

Tile cropped(const Tile& t, int64_t keep) {
  Tile c{t.lead, t.planes, std::min(keep, t.h), std::min(keep, t.w), {}};
  for (int64_t n = 0; n < t.planes; ++n)
    for (int64_t y = 0; y < c.h; ++y)
      c.v.insert(c.v.end(), t.v.begin() + (n * t.h + y) * t.w,
                 t.v.begin() + (n * t.h + y) * t.w + c.w);
  return c;
}

// The kept rows of tiles, side by side, in dtype `dt`.
Tensor assemble(const std::vector<std::vector<Tile>>& rows, DType dt) {
  int64_t height = 0, width = 0;
  for (const auto& r : rows) height += r[0].h;
  for (const Tile& t : rows[0]) width += t.w;
  const Tile& first = rows[0][0];
  std::vector<float> full(std::size_t(first.planes * height * width));
  int64_t y0 = 0;
  for (const auto& r : rows) {
    int64_t x0 = 0;
    for (const Tile& t : r) {
      for (int64_t n = 0; n < t.planes; ++n)
        for (int64_t y = 0; y < t.h; ++y)
          std::memcpy(full.data() + (n * height + y0 + y) * width + x0,
                      t.v.data() + (n * t.h + y) * t.w, std::size_t(t.w) * sizeof(float));
      x0 += t.w;
    }
    y0 += r[0].h;
  }
  Shape s = first.lead;
  s.push_back(height);
  s.push_back(width);
  Tensor out = Tensor::uninitialized(dt, s);
  convert_elements(full.data(), DType::kF32, out.raw(), dt, full.size());
  return out;
}

}  // namespace

Expected<Tensor> stream_blended_tiles(
    const Tensor& x, const std::function<Expected<Tensor>(const Tensor&)>& run_tile,
    const BlendedGrid& g, int64_t* rows_out, int64_t* cols_out) {
  const int r = x.rank();
  std::vector<Tile> prev, cur;
  std::vector<std::vector<Tile>> kept;
  DType dt = DType::kF32;
  for (int64_t i = 0; i < x.dim(r - 2); i += g.stride) {
    cur.clear();
    for (int64_t j = 0; j < x.dim(r - 1); j += g.stride) {
      TP_ASSIGN_OR_RETURN(Tensor out, run_tile(window(x, i, j, g.size)));
      dt = out.dtype();
      Tile t = to_tile(out);
      if (!prev.empty()) blend_into(prev[cur.size()], t, g.blend, true, dt);
      if (!cur.empty()) blend_into(cur.back(), t, g.blend, false, dt);
      cur.push_back(std::move(t));
    }
    kept.emplace_back();
    for (const Tile& t : cur) kept.back().push_back(cropped(t, g.keep));
    prev.swap(cur);
  }
  *rows_out = int64_t(kept.size());
  *cols_out = int64_t(kept[0].size());
  return assemble(kept, dt);
}

}  // namespace tp
