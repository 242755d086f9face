#!/usr/bin/env python3
"""The current-PyTorch peer of twinpath's `wan.step` (issue 40): diffusers' own
WanTransformer3DModel called on the same model folder and inputs, timed the same way.

Run by tools/bench-wan.sh in the benchmark venv (PyTorch and diffusers from PyPI), never by the
build or the tests. fp32 on the CPU with --threads threads by default, or --device cuda in --dtype
(the GPU run's peer of `exec --path compiled:cuda`, synchronized around each call); one untimed
call, then --repeats timed calls, the best reported. Writes the output for the agreement with twinpath's and prints one JSON
object: {"name", "ms", "threads", "torch", "peak_rss_mb"}.
"""
import argparse
import json
import resource
import time

import torch
from diffusers import WanTransformer3DModel
from safetensors.torch import load_file, save_file

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--name", default="wan.step")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="f32", choices=list(DTYPES))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    dtype = DTYPES[a.dtype]
    model = WanTransformer3DModel.from_pretrained(a.model, torch_dtype=dtype).eval().to(a.device)
    x = load_file(a.input)
    args = [x[k].to(a.device) for k in ("hidden_states", "timestep", "encoder_hidden_states")]
    args = [t.to(dtype) if t.is_floating_point() and t.dim() > 1 else t for t in args]
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    with torch.no_grad():
        out = model(*args, return_dict=False)[0]
        best = float("inf")
        for _ in range(a.repeats):
            sync()
            start = time.perf_counter()
            out = model(*args, return_dict=False)[0]
            sync()
            best = min(best, time.perf_counter() - start)
    save_file({"sample": out.float().cpu().contiguous()}, a.output)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"name": a.name, "ms": best * 1e3, "threads": a.threads,
                      "device": a.device, "dtype": a.dtype, "torch": torch.__version__,
                      "peak_rss_mb": round(peak)}))


if __name__ == "__main__":
    main()
