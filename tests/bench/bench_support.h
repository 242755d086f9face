// Shared by the benchmark binaries: seeded inputs, the sd-kl model (seeded random weights) and
// the decoder's FLOP count, the floor every figure is measured against.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "harness/model.h"
#include "harness/rng.h"

namespace tp::bench {

inline Tensor random_f32(const Shape& shape, const std::string& stream) {
  Tensor t(DType::kF32, shape);
  Rng rng(1, stream);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(rng.uniform(-1, 1));
  return t;
}

inline const Model& sd_kl() {
  static const Model model = [] {
    const std::string dir = (std::filesystem::temp_directory_path() / ("tp_bench_sdkl_" + std::to_string(::getpid()))).string();
    if (!init_model("sd-kl", 0, dir).ok()) std::abort();
    Model m = load_model(dir).value();
    std::filesystem::remove_all(dir);
    return m;
  }();
  return model;
}

// SD/SDXL KL decoder at image x image: conv + linear + attention matmul work (vae-facts.md §8).
inline double decoder_flops(int image) {
  const double h = image / 8.0;
  const auto conv = [](double ci, double co, double k, double px) { return ci * co * k * k * px; };
  const auto res = [&](double ci, double co, double px) {
    return conv(ci, co, 3, px) + conv(co, co, 3, px) + (ci != co ? conv(ci, co, 1, px) : 0);
  };
  double px = h * h, macs = conv(4, 4, 1, px) + conv(4, 512, 3, px) + 2 * res(512, 512, px) + 4 * 512 * 512 * px + 2 * px * px * 512;
  const int rev[] = {512, 512, 256, 128};
  int prev = 512;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) macs += res(j == 0 ? prev : rev[i], rev[i], px);
    prev = rev[i];
    if (i < 3) {
      px *= 4;
      macs += conv(rev[i], rev[i], 3, px);
    }
  }
  return 2 * (macs + conv(128, 3, 3, px));
}

}  // namespace tp::bench
