#include "reference/torch/contract_conv.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace tp::torch_path {
namespace {

constexpr int kAxes = 3;                            // spatial axes, right-aligned (1-D to 3-D)
constexpr int64_t kColumnBytes = int64_t(1) << 21;  // one block's fp64 columns: 2 MiB
constexpr int64_t kFewestPositions = 64;            // a block's positions, at least

// A conv's sizes, its spatial axes right-aligned into three (leading ones of size 1).
struct Geometry {
  int64_t batch = 0, channels = 0, out_channels = 0, groups = 1, group_in = 0, group_out = 0;
  std::array<int64_t, kAxes> in{1, 1, 1}, kernel{1, 1, 1}, out{1, 1, 1}, stride{1, 1, 1},
      dilation{1, 1, 1};
  int64_t taps = 1, rows = 0, positions = 1, plane = 1;  // plane: one padded channel's elements
};

Geometry geometry(const OpAttrs& a, const torch::Tensor& xp, const torch::Tensor& w) {
  Geometry g;
  const int axes = int(w.dim()) - 2;
  g.batch = xp.size(0);
  g.channels = xp.size(1);
  g.out_channels = w.size(0);
  g.groups = a.conv_groups;
  g.group_in = g.channels / g.groups;
  g.group_out = g.out_channels / g.groups;
  for (int d = 0; d < axes; ++d) {
    const int at = kAxes - axes + d;
    g.in[std::size_t(at)] = xp.size(2 + d);
    g.kernel[std::size_t(at)] = w.size(2 + d);
    g.stride[std::size_t(at)] = a.strides[std::size_t(d)];
    g.dilation[std::size_t(at)] = a.dilations[std::size_t(d)];
  }
  for (std::size_t d = 0; d < kAxes; ++d) {
    g.out[d] = (g.in[d] - g.dilation[d] * (g.kernel[d] - 1) - 1) / g.stride[d] + 1;
    g.taps *= g.kernel[d];
    g.positions *= g.out[d];
    g.plane *= g.in[d];
  }
  g.rows = g.group_in * g.taps;
  return g;
}

// cols[r * n + j]: row r = (channel c of the group, tap t) at output position p0 + j, in the
// weights' order ([channel][kernel axes]); `x` is the group's first padded channel.
void fill_columns(const double* x, const Geometry& g, int64_t p0, int64_t n, double* cols) {
  const int64_t k1 = g.kernel[1], k2 = g.kernel[2], o1 = g.out[1], o2 = g.out[2];
  const int64_t row = g.in[2], slab = g.in[1] * g.in[2];  // input strides of axes 1 and 0
  for (int64_t r = 0; r < g.rows; ++r) {
    const int64_t c = r / g.taps, t = r % g.taps;
    const int64_t t0 = t / (k1 * k2), t1 = t / k2 % k1, t2 = t % k2;
    const double* src =
        x + c * g.plane + t0 * g.dilation[0] * slab + t1 * g.dilation[1] * row + t2 * g.dilation[2];
    double* dst = cols + r * n;
    int64_t a0 = p0 / (o1 * o2), a1 = p0 / o2 % o1, a2 = p0 % o2;
    for (int64_t j = 0; j < n;) {  // a run along the last axis, then the next row of outputs
      const int64_t run = std::min(n - j, o2 - a2);
      const double* s = src + a0 * g.stride[0] * slab + a1 * g.stride[1] * row + a2 * g.stride[2];
      if (g.stride[2] == 1)
        std::copy(s, s + run, dst + j);
      else
        for (int64_t i = 0; i < run; ++i) dst[j + i] = s[i * g.stride[2]];
      j += run;
      a2 = 0;
      if (++a1 == o1) a1 = 0, ++a0;
    }
  }
}

torch::Tensor f64_blob(std::vector<double>& v, int64_t rows, int64_t cols) {
  return torch::from_blob(v.data(), {rows, cols}, torch::kFloat64);
}

// One block's raised sums: |w| (fp32) times the fp32 columns, widened, plus |b|, times `raise`,
// into out [group_out, n] (a view of the sums); where fp32 overflowed, from the fp64 columns.
struct BlockSums {
  std::vector<float>& cols32;
  std::vector<double>& cols64;
  std::vector<float>& sums32;
  double raise;

  void operator()(const torch::Tensor& aw32, const torch::Tensor& aw64, const double* ab, int64_t n,
                  torch::Tensor out) const {
    const int64_t m = aw32.size(0), k = aw32.size(1);
    torch::Tensor s = torch::from_blob(sums32.data(), {m, n}, torch::kFloat32);
    torch::mm_out(s, aw32, torch::from_blob(cols32.data(), {k, n}, torch::kFloat32));
    bool finite = true;
    for (int64_t i = 0; i < m * n; ++i) finite &= std::isfinite(sums32[std::size_t(i)]);
    double* o = out.data_ptr<double>();
    const int64_t stride = out.stride(0);
    auto raised = [&](const auto* sum) {
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j)
          o[r * stride + j] = (double(sum[r * n + j]) + (ab ? ab[r] : 0.0)) * raise;
    };
    if (finite) return raised(sums32.data());
    const torch::Tensor wide = torch::mm(aw64, f64_blob(cols64, k, n));
    raised(wide.data_ptr<double>());
  }
};

// The columns' magnitudes rounded to fp32 (round to nearest), and `cols64` made |cols64|.
void magnitudes(std::vector<double>& cols64, std::vector<float>& cols32, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double a = std::abs(cols64[std::size_t(i)]);
    cols64[std::size_t(i)] = a;
    cols32[std::size_t(i)] = float(a);
  }
}

}  // namespace

ConvSums conv_sums(const OpAttrs& a, const torch::Tensor& x, const torch::Tensor& e,
                   const torch::Tensor& w, const torch::Tensor& b, double raise) {
  const torch::Tensor xp = conv_padded(a, x).contiguous();
  const torch::Tensor ep = e.defined() ? conv_padded(a, e).contiguous() : torch::Tensor();
  const Geometry g = geometry(a, xp, w);
  ConvSums out;
  out.y = torch::empty({g.batch, g.out_channels, g.positions}, xp.options());
  out.terms = torch::empty_like(out.y);
  if (ep.defined()) out.carried = torch::empty_like(out.y);
  const torch::Tensor wm = w.reshape({g.groups, g.group_out, g.rows}).contiguous();
  const torch::Tensor aw64 = wm.abs(), aw32 = aw64.to(torch::kFloat32);
  const torch::Tensor ab = b.defined() ? b.abs().contiguous() : torch::Tensor();
  const int64_t block = std::min(
      g.positions, std::max(kFewestPositions, kColumnBytes / (int64_t(sizeof(double)) * g.rows)));
  thread_local std::vector<double> cols64;
  thread_local std::vector<float> cols32, sums32;
  cols64.resize(std::size_t(g.rows * block));
  cols32.resize(cols64.size());
  sums32.resize(std::size_t(g.group_out * block));
  const BlockSums sums{cols32, cols64, sums32, raise};
  const double* xs = xp.data_ptr<double>();
  const double* es = ep.defined() ? ep.data_ptr<double>() : nullptr;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const int64_t first_in = (n * g.channels + grp * g.group_in) * g.plane;
      auto part = [&](const torch::Tensor& t, int64_t p0, int64_t count) {
        return t.select(0, n).narrow(0, grp * g.group_out, g.group_out).narrow(1, p0, count);
      };
      const double* ab_group = ab.defined() ? ab.data_ptr<double>() + grp * g.group_out : nullptr;
      for (int64_t p0 = 0; p0 < g.positions; p0 += block) {
        const int64_t count = std::min(block, g.positions - p0);
        fill_columns(xs + first_in, g, p0, count, cols64.data());
        torch::Tensor y = part(out.y, p0, count);
        torch::mm_out(y, wm[grp], f64_blob(cols64, g.rows, count));
        magnitudes(cols64, cols32, g.rows * count);
        sums(aw32[grp], aw64[grp], ab_group, count, part(out.terms, p0, count));
        if (!es) continue;
        fill_columns(es + first_in, g, p0, count, cols64.data());
        for (int64_t i = 0; i < g.rows * count; ++i)
          cols32[std::size_t(i)] = float(cols64[std::size_t(i)]);
        sums(aw32[grp], aw64[grp], nullptr, count, part(out.carried, p0, count));
      }
    }
  if (b.defined()) out.y.add_(b.reshape({1, -1, 1}));
  std::vector<int64_t> shape{g.batch, g.out_channels};
  for (int64_t d = 2; d < xp.dim(); ++d)
    shape.push_back(g.out[std::size_t(kAxes - (xp.dim() - 2) + (d - 2))]);
  out.y = out.y.reshape(shape);
  out.terms = out.terms.reshape(shape);
  if (out.carried.defined()) out.carried = out.carried.reshape(shape);
  return out;
}

}  // namespace tp::torch_path
