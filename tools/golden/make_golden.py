"""Writes golden inputs and diffusers outputs for small random-weight VAEs.

For each model: <out>/<name>/config.json, diffusion_pytorch_model.safetensors (f32 weights) and
io.safetensors with
  image [2,3,H,W] f32 in [-1,1]       latent [2,L,h,w] f32
  f64 outputs (diffusers run in float64): encode.mean, encode.logvar | encode.latents,
      decode.sample, roundtrip.sample (KL: decode(posterior.mode()))
  f32 outputs (diffusers run in float32): the same names with a .f32 suffix
  tiled.* (tiny-kl and tiny-taesd): the same pipelines with vae.enable_tiling(), float64,
      on inputs large enough to tile (tiled.image, tiled.latent)
diffusers 0.21.4 on torch 1.13 runs attention through AttnProcessor, whose softmax is done in
float32 even for a float64 model (upcast_softmax), so its float64 outputs carry ~1e-8 error.
"""
import json
import os
import sys

import torch
from diffusers import AutoencoderKL, AutoencoderTiny
from safetensors.torch import save_file

from seeded_weights import randomize

KL_BLOCKS = lambda n: dict(down_block_types=["DownEncoderBlock2D"] * n, up_block_types=["UpDecoderBlock2D"] * n)

MODELS = {
    # Same as twinpath's built-in tiny-kl.
    "tiny-kl": ("kl", dict(block_out_channels=[16, 32, 32], layers_per_block=1, norm_num_groups=8,
                           latent_channels=4, sample_size=32, **KL_BLOCKS(3)), {}),
    "kl-3level": ("kl", dict(block_out_channels=[16, 16, 32], layers_per_block=2, norm_num_groups=8,
                             latent_channels=4, sample_size=64, **KL_BLOCKS(3)), {}),
    # diffusers 0.21.4 predates use_quant_conv/use_post_quant_conv; Identity modules compute
    # exactly what newer diffusers' `quant_conv is None` branches do.
    "kl-16lat-noquant": ("kl", dict(block_out_channels=[16, 32], layers_per_block=1, norm_num_groups=8,
                                    latent_channels=16, sample_size=32, **KL_BLOCKS(2)),
                         dict(use_quant_conv=False, use_post_quant_conv=False)),
    # Same as twinpath's built-in tiny-taesd.
    "tiny-taesd": ("tiny", dict(encoder_block_out_channels=[16] * 4, decoder_block_out_channels=[16] * 4,
                                num_encoder_blocks=[1, 1, 1, 1], num_decoder_blocks=[1, 1, 1, 1],
                                latent_channels=4), {}),
}


def image_like(shape, seed):
    """Smooth gradients, an edge and mild noise, in [-1, 1]: closer to an image than noise."""
    g = torch.Generator().manual_seed(seed)
    b, c, h, w = shape
    y = torch.linspace(-1, 1, h).view(1, 1, h, 1)
    x = torch.linspace(-1, 1, w).view(1, 1, 1, w)
    phase = torch.rand(b, c, 1, 1, generator=g) * 6.28
    img = 0.6 * torch.sin(3 * x + 2 * y + phase) + 0.3 * torch.sign(x - 0.2 * y)
    img = img + 0.1 * torch.randn(shape, generator=g)
    return img.clamp(-1, 1).float()


def run_all(vae, kind, image, latent, dtype, prefix, suffix):
    vae = vae.to(dtype)
    out = {}
    with torch.no_grad():
        if kind == "kl":
            post = vae.encode(image.to(dtype)).latent_dist
            out[f"{prefix}encode.mean{suffix}"] = post.mean
            out[f"{prefix}encode.logvar{suffix}"] = post.logvar
            out[f"{prefix}roundtrip.sample{suffix}"] = vae.decode(post.mode()).sample
        else:
            out[f"{prefix}encode.latents{suffix}"] = vae.encode(image.to(dtype)).latents
        out[f"{prefix}decode.sample{suffix}"] = vae.decode(latent.to(dtype)).sample
    return out


def make(name, kind, cfg, extra, out_dir, seed):
    torch.manual_seed(seed)
    if kind == "kl":
        vae = AutoencoderKL(**cfg)
        if not extra.get("use_quant_conv", True):
            vae.quant_conv = torch.nn.Identity()
        if not extra.get("use_post_quant_conv", True):
            vae.post_quant_conv = torch.nn.Identity()
        down = 2 ** (len(cfg["block_out_channels"]) - 1)
    else:
        vae = AutoencoderTiny(**cfg)
        down = 8
    vae.eval()
    randomize(vae, seed)
    lat = cfg["latent_channels"]
    # Odd sizes on purpose: the encoder's floor-halving and asymmetric padding must match.
    image = image_like((2, 3, 9 * down + 3, 13 * down + 1), seed + 1)
    latent = torch.randn((2, lat, 9, 13), generator=torch.Generator().manual_seed(seed + 2)).float()
    tensors = {"image": image, "latent": latent}
    tensors.update(run_all(vae, kind, image, latent, torch.float64, "", ""))
    tensors.update(run_all(vae, kind, image, latent, torch.float32, "", ".f32"))
    if name in ("tiny-kl", "tiny-taesd"):
        tiled_image = image_like((1, 3, 88, 72), seed + 3)
        tiled_latent = torch.randn((1, lat, 20, 14), generator=torch.Generator().manual_seed(seed + 4)).float()
        tensors["tiled.image"], tensors["tiled.latent"] = tiled_image, tiled_latent
        vae.enable_tiling()
        tensors.update(run_all(vae, kind, tiled_image, tiled_latent, torch.float64, "tiled.", ""))
        vae.disable_tiling()

    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    state = {k: v.float().contiguous() for k, v in vae.to(torch.float32).state_dict().items()}
    save_file(state, os.path.join(folder, "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    config = dict(vae.config)
    config.update(extra)
    config["_class_name"] = type(vae).__name__
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({k: (list(v) if isinstance(v, tuple) else v) for k, v in config.items()}, f, indent=2, sort_keys=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(folder, "io.safetensors"))
    print(f"{name}: {sum(p.numel() for p in state.values())} params, {len(tensors)} tensors")


def main():
    out_dir = sys.argv[1]
    for i, (name, (kind, cfg, extra)) in enumerate(sorted(MODELS.items())):
        make(name, kind, cfg, extra, out_dir, seed=1000 + i)


if __name__ == "__main__":
    main()
