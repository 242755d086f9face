#!/usr/bin/env python3
"""diffusers' AutoencoderKLHunyuanVideo.decode on the CPU (fp32), timed: the PyTorch peer of
tools/bench-hv.sh. Reads a model folder and a .safetensors of one latents tensor, decodes with
the given tiling (diffusers' enable_tiling sizes; framewise on or off), writes the video and
prints one JSON line {name, torch, ms, threads}. Never run by the build or the tests.
"""
import json
import time

import torch
from diffusers import AutoencoderKLHunyuanVideo
from safetensors.torch import load_file, save_file

from peer_args import peer_parser


def main():
    ap = peer_parser(__doc__)
    ap.add_argument("--tile", default="", help="MIN:STRIDE in pixels: enable_tiling")
    ap.add_argument("--framewise", default="on", choices=["on", "off"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    vae = AutoencoderKLHunyuanVideo.from_pretrained(a.model).eval()
    if a.tile:
        lo, stride = (int(v) for v in a.tile.split(":"))
        vae.enable_tiling(tile_sample_min_height=lo, tile_sample_min_width=lo,
                          tile_sample_stride_height=stride, tile_sample_stride_width=stride)
    vae.use_framewise_decoding = a.framewise == "on"
    z = next(iter(load_file(a.input).values()))
    with torch.no_grad():
        start = time.perf_counter()
        video = vae.decode(z).sample
        ms = (time.perf_counter() - start) * 1e3
    save_file({"sample": video.contiguous()}, a.output)
    print(json.dumps({"name": a.name, "torch": torch.__version__, "ms": round(ms, 1),
                      "threads": a.threads}))


if __name__ == "__main__":
    main()
