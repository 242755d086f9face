"""The arguments every PyTorch peer of the CPU benchmarks (tools/bench-*.sh) takes: a model
folder, an input and an output .safetensors, the result's name and the thread count."""
import argparse


def peer_parser(doc):
    ap = argparse.ArgumentParser(description=doc.strip().split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--threads", type=int, default=2)
    return ap
