#!/usr/bin/env python3
"""The current-PyTorch peer of twinpath's `wan.step` (issue 40): diffusers' own
WanTransformer3DModel called on the same model folder and inputs, timed the same way.

Run by tools/bench-wan.sh in the benchmark venv (PyTorch and diffusers from PyPI), never by the
build or the tests. fp32 on the CPU with --threads threads; one untimed call, then --repeats timed
calls, the best reported. Writes the output for the agreement with twinpath's and prints one JSON
object: {"name", "ms", "threads", "torch", "peak_rss_mb"}.
"""
import argparse
import json
import resource
import time

import torch
from diffusers import WanTransformer3DModel
from safetensors.torch import load_file, save_file


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--name", default="wan.step")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model = WanTransformer3DModel.from_pretrained(a.model, torch_dtype=torch.float32).eval()
    x = load_file(a.input)
    args = (x["hidden_states"], x["timestep"], x["encoder_hidden_states"])
    with torch.no_grad():
        out = model(*args, return_dict=False)[0]
        best = float("inf")
        for _ in range(a.repeats):
            start = time.perf_counter()
            out = model(*args, return_dict=False)[0]
            best = min(best, time.perf_counter() - start)
    save_file({"sample": out.contiguous()}, a.output)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"name": a.name, "ms": best * 1e3, "threads": a.threads,
                      "torch": torch.__version__, "peak_rss_mb": round(peak)}))


if __name__ == "__main__":
    main()
