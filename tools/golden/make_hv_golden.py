"""Writes golden inputs and diffusers outputs for small random-weight AutoencoderKLHunyuanVideos.

For each model: <out>/<name>/config.json, diffusion_pytorch_model.safetensors (f32 weights) and
io.safetensors with
  sample [B,3,T,H,W] in [-1,1]      latents [B,L,T',H/8,W/8]
  mean.f64, logvar.f64, mean.f32, logvar.f32: vae.encode(sample).latent_dist's (the logvar
                                               clamped to [-30, 20] as DiagonalGaussianDistribution)
  decoded.f64, decoded.f32: vae.decode(latents).sample
untiled and not framewise (use_tiling and both use_framewise_* False: diffusers' defaults turn
framewise on, which an untiled reference must turn off, video-vae-facts 6.1); and, for the tiled
runs tiled.json lists (in space, in time and both, each crossing diffusers' thresholds),
tiled.<variant>.input (float32) and diffusers' float64 outputs tiled.<variant>.<output> (rounded
to float32).
Run by tools/make-hv-golden-fixtures.sh in a venv with PyPI's torch and diffusers 0.42.1 (the
version ../shared/docs/reference/video-vae-facts.md describes).
"""
import json
import os
import sys

import torch
from diffusers import AutoencoderKLHunyuanVideo
from safetensors.torch import save_file

from seeded_weights import randomize

MODELS = {
    # twinpath's built-in tiny-hv (video-vae-facts 9): 9 frames -> 3 latent frames, 32x48.
    "tiny-hv": (dict(block_out_channels=[8, 8, 16, 16], latent_channels=4, layers_per_block=1,
                     norm_num_groups=4), (1, 3, 9, 32, 48), (1, 4, 3, 4, 6)),
    # Not built in: 3 levels (spatial ratio 4: the last level resamples neither), odd channels
    # per group (6 groups of 2 and 3), 2 resnets per level, 5 latent channels, no mid-block
    # attention, 4 input channels, batch 2 and a frame count that is not 4k+1 (6 -> 2 latents).
    "hv-three-levels": (dict(in_channels=4, out_channels=2, block_out_channels=[12, 18, 18],
                             latent_channels=5, layers_per_block=2, norm_num_groups=6,
                             spatial_compression_ratio=4, mid_block_add_attention=False),
                        (2, 4, 6, 16, 12), (2, 5, 2, 4, 3)),
    # Not built in: 5 levels with the mid-block attention over 4 latent frames of 2x3 (frame-
    # causal over 24 tokens), 1 input frame through the encoder (a still image).
    "hv-five-levels": (dict(block_out_channels=[4, 8, 8, 16, 16], latent_channels=3,
                            layers_per_block=1, norm_num_groups=4),
                       (1, 3, 1, 16, 24), (1, 3, 4, 2, 3)),
}


def with_blocks(config):
    n = len(config["block_out_channels"])
    return dict(config, down_block_types=["HunyuanVideoDownBlock3D"] * n,
                up_block_types=["HunyuanVideoUpBlock3D"] * n)


def untiled(vae):
    vae.use_tiling = False
    vae.use_framewise_encoding = False
    vae.use_framewise_decoding = False
    return vae


def variants(ratio):
    """Tiled runs that cross diffusers' thresholds in space, in time and both: (name, stage,
    use_tiling, (min px, stride px) or None, framewise, (min frames, stride frames) or None,
    input frames, input height and width in latents)."""
    r, space = ratio, (4 * ratio, 3 * ratio)
    return [
        ("decode_space", "decode", True, space, False, None, 2, (5, 7)),
        ("decode_time", "decode", False, None, True, None, 6, (2, 3)),
        ("decode_time_short", "decode", False, None, True, (8, 4), 5, (2, 2)),
        ("decode_both", "decode", True, space, True, (8, 4), 4, (5, 5)),
        ("encode_space", "encode", True, space, False, None, 5, (5, 7)),
        ("encode_time", "encode", False, None, True, None, 21, (2, 2)),
        ("encode_both", "encode", True, space, True, (8, 4), 13, (5, 5)),
    ]


def tiled_runs(name, vae, config, video, latent, io):
    """Each variant's input and diffusers' float64 output, keyed "tiled.<variant>.*"; the options
    go to tiled.json beside them."""
    ratio = config.get("spatial_compression_ratio", 8)
    plan = []
    g = torch.Generator().manual_seed(2)
    m = vae.to(torch.float64)
    for variant, stage, tiling, space, framewise, frames, t, (h, w) in variants(ratio):
        m.use_tiling = tiling
        m.use_framewise_encoding = m.use_framewise_decoding = framewise
        m.tile_sample_min_height = m.tile_sample_min_width = space[0] if space else 256
        m.tile_sample_stride_height = m.tile_sample_stride_width = space[1] if space else 192
        m.tile_sample_min_num_frames, m.tile_sample_stride_num_frames = frames or (16, 12)
        if stage == "decode":
            x = torch.randn(latent[0], latent[1], t, h, w, generator=g)
            with torch.no_grad():
                y = m.decode(x.double()).sample
            outs = {"sample": y}
        else:
            x = torch.rand(video[0], video[1], t, h * ratio, w * ratio, generator=g) * 2 - 1
            with torch.no_grad():
                post = m.encode(x.double()).latent_dist
            outs = {"mean": post.mean, "logvar": post.logvar}
        # Stored in float32 (the float64 run's outputs rounded once: 6e-8 relative, far below
        # the 1e-5 the tests ask) to keep the fixtures small.
        io[f"tiled.{variant}.input"] = x
        for k, v in outs.items():
            io[f"tiled.{variant}.{k}"] = v.float()
        plan.append(dict(variant=variant, pipeline="video." + stage, tiling=tiling,
                         tile=list(space) if space else [0, 0], framewise=framewise,
                         tile_frames=list(frames) if frames else [0, 0], outputs=list(outs)))
    untiled(vae)
    return plan


def main(out_root):
    for name, (config, video, latent) in MODELS.items():
        torch.manual_seed(0)
        vae = untiled(AutoencoderKLHunyuanVideo(**with_blocks(config)).eval())
        randomize(vae, seed=sum(map(ord, name)))
        folder = os.path.join(out_root, name)
        os.makedirs(folder, exist_ok=True)
        vae.save_pretrained(folder, safe_serialization=True)
        g = torch.Generator().manual_seed(1)
        io = {"sample": torch.rand(*video, generator=g) * 2 - 1,
              "latents": torch.randn(*latent, generator=g)}
        for dtype, tag in ((torch.float64, "f64"), (torch.float32, "f32")):
            m = vae.to(dtype)
            with torch.no_grad():
                posterior = m.encode(io["sample"].to(dtype)).latent_dist
                io["mean." + tag] = posterior.mean
                io["logvar." + tag] = posterior.logvar
                io["decoded." + tag] = m.decode(io["latents"].to(dtype)).sample
        plan = tiled_runs(name, vae, config, video, latent, io)
        with open(os.path.join(folder, "tiled.json"), "w") as f:
            json.dump(plan, f, indent=1)
        save_file({k: v.contiguous() for k, v in io.items()}, os.path.join(folder, "io.safetensors"))
        print(name, {k: tuple(v.shape) for k, v in io.items()})


if __name__ == "__main__":
    main(sys.argv[1])
