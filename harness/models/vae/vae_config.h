// What the VAE code every image VAE shares (pipelines, tiling, inputs: this folder) reads of a
// model's config. Each architecture's folder derives its config from VaeConfig and parses its
// config.json (autoencoder_kl/kl_config.h, autoencoder_tiny/tiny_config.h); this folder names
// none of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/graph.h"
#include "harness/models/family.h"

namespace tp {

// How diffusers' enable_tiling() cuts this architecture's inputs (tiling.cpp, streamed_tiling.cpp).
struct VaeTilingStyle {
  // AutoencoderTiny: tiles whenever tiling is on and joins them with masks, 1/8 overlap.
  // Otherwise AutoencoderKL's: tiles above the tile size, blends 1/4 (blend_v, blend_h), and
  // a tiled encode blends the moments (moments_graph()) before the posterior.
  bool masks = false;
  int64_t ratio = 8;         // image pixels per latent pixel, as diffusers' tiler computes it
  int64_t sample_min = 512;  // the tile size in image pixels when none is given
};

struct VaeConfig : ModelConfig {
  virtual const char* class_name() const = 0;
  virtual int latent_channels() const = 0;
  virtual int image_channels() const = 0;
  virtual int downscale() const = 0;
  virtual Graph encoder_graph() const = 0;
  virtual Graph decoder_graph() const = 0;  // vae_graphs.h sets its input_pixel
  // The encoder up to what a blended tiled encode blends (AutoencoderKL: the 2L-channel moments
  // before the posterior's chunk and clamp); unused when the style masks.
  virtual Graph moments_graph() const = 0;
  virtual VaeTilingStyle tiling_style() const = 0;

  // The family that parsed it (VaeFamily::parse_config).
  const Family* owner = nullptr;
  const Family& family() const override;
};

// The VAE config of a model of a VAE family (a model of another family is a bug here).
const VaeConfig& vae_config(const Model& model);

}  // namespace tp
