#!/usr/bin/env python3
"""diffusers' UNet2DConditionModel on the CPU (fp32), one step timed: the PyTorch peer of
tools/bench-unet.sh. Reads a model folder and a .safetensors of the step's inputs (sample,
timestep, encoder_hidden_states, and text_embeds, time_ids for SDXL), makes one untimed call and
REPEATS timed ones, writes the last output and prints one JSON line {name, torch, ms (the best),
cold_ms, threads}. Never run by the build or the tests.
"""
import json
import time

import torch
from diffusers import UNet2DConditionModel
from safetensors.torch import load_file, save_file

from peer_args import peer_parser


def main():
    ap = peer_parser(__doc__)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    unet = UNet2DConditionModel.from_pretrained(a.model).eval()
    x = load_file(a.input)
    added = {k: x[k] for k in ("text_embeds", "time_ids") if k in x}
    times = []
    with torch.no_grad():
        for _ in range(1 + a.repeats):
            start = time.perf_counter()
            out = unet(x["sample"], x["timestep"], x["encoder_hidden_states"],
                       added_cond_kwargs=added or None).sample
            times.append((time.perf_counter() - start) * 1e3)
    save_file({"sample": out.contiguous()}, a.output)
    print(json.dumps({"name": a.name, "torch": torch.__version__, "ms": round(min(times[1:]), 1),
                      "cold_ms": round(times[0], 1), "threads": a.threads}))


if __name__ == "__main__":
    main()
