#!/usr/bin/env python3
"""Relative L2 distance ||a - b|| / ||b|| between the one tensor of each of two .safetensors files
(benchmark outputs against their peer's), in float64 whatever the stored dtype (bf16 too). Needs
torch and safetensors (the benchmark venv, or the GPU machine's python3); never run by the tests.

Usage: rel_l2.py A.safetensors B.safetensors  -> prints one number
"""
import sys

import torch
from safetensors.torch import load_file


def only_tensor(path):
    tensors = load_file(path)
    if len(tensors) != 1:
        sys.exit(f"{path} holds {len(tensors)} tensors; rel_l2.py compares files of one tensor")
    return next(iter(tensors.values())).to(torch.float64).flatten()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    a, b = only_tensor(sys.argv[1]), only_tensor(sys.argv[2])
    if a.shape != b.shape:
        sys.exit(f"shapes differ: {a.numel()} against {b.numel()} elements")
    print(f"{(torch.linalg.norm(a - b) / torch.linalg.norm(b)).item():.3e}")


if __name__ == "__main__":
    main()
