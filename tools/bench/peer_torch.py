#!/usr/bin/env python3
"""The current-PyTorch peer of reference_bench (issue 16): the same work, timed the same way.

Run by tools/bench-peer.sh in its own venv (PyTorch and diffusers from PyPI), never by the build
or the tests. On the CPU, fp32, NCHW, with the thread count the C++ benchmarks use:
  - the machine's fp32 ceiling: torch.mm of 2048^3 (the same problem as BM_SgemmCeiling);
  - F.conv2d on the SD-VAE's conv shapes (tests/bench/bench_support.h kShapes);
  - nn.Linear at the denoisers' shapes (the same list as BM_Linear*);
  - the whole sd-kl decode (diffusers' AutoencoderKL.decode) of the model folder twinpath wrote,
    on a seeded 1x4x32x32 latent, with its relative L2 from the same decode in fp64; the latent
    and the fp64 output are written to --out for the reference's own error.
--only decode-time times the decode without its fp64 error. Prints one JSON object per line:
{"name", "ms", "gflops", ...}.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

# (where, cin, cout, k, stride, h, w, asymmetric pad): kShapes in tests/bench/bench_support.h.
CONV_SHAPES = [
    ("decoder.conv_in", 4, 512, 3, 1, 32, 32, False),
    ("decoder.mid_block.resnets.*.conv*", 512, 512, 3, 1, 32, 32, False),
    ("decoder.up_blocks.1.resnets.*.conv*", 512, 512, 3, 1, 64, 64, False),
    ("decoder.up_blocks.2.resnets.0.conv1", 512, 256, 3, 1, 128, 128, False),
    ("decoder.up_blocks.2.resnets.0.conv_shortcut", 512, 256, 1, 1, 128, 128, False),
    ("decoder.up_blocks.2.upsamplers.0.conv", 256, 256, 3, 1, 256, 256, False),
    ("decoder.up_blocks.3.resnets.*.conv2", 128, 128, 3, 1, 256, 256, False),
    ("decoder.conv_out", 128, 3, 3, 1, 256, 256, False),
    ("encoder.down_blocks.0.downsamplers.0.conv", 128, 128, 3, 2, 256, 256, True),
]

# (where, tokens, in, out): kLinearShapes in tests/bench/bench_support.h.
LINEAR_SHAPES = [
    ("sdxl 1024^2 down_blocks.1 attn to_q (4096 tok)", 4096, 640, 640),
    ("sdxl 1024^2 down_blocks.1 ff GEGLU proj", 4096, 640, 5120),
    ("sdxl 1024^2 down_blocks.1 ff.net.2", 4096, 2560, 640),
    ("sdxl 1024^2 down_blocks.2 attn to_q (1024 tok)", 1024, 1280, 1280),
    ("sdxl 1024^2 down_blocks.2 ff GEGLU proj", 1024, 1280, 10240),
    ("sdxl 1024^2 down_blocks.2 ff.net.2", 1024, 5120, 1280),
    ("wan-1.3b 480x832 ffn.0 (1 latent frame)", 1560, 1536, 8960),
    ("wan-1.3b 480x832 ffn.2 (1 latent frame)", 1560, 8960, 1536),
]


def decoder_flops(image):
    """bench::decoder_flops: conv, linear and attention-product work of the SD-VAE decoder."""
    px = (image / 8.0) ** 2
    conv = lambda ci, co, k, p: ci * co * k * k * p
    res = lambda ci, co, p: conv(ci, co, 3, p) + conv(co, co, 3, p) + (conv(ci, co, 1, p) if ci != co else 0)
    macs = conv(4, 4, 1, px) + conv(4, 512, 3, px) + 2 * res(512, 512, px) + 4 * 512 * 512 * px + 2 * px * px * 512
    prev = 512
    for i, ch in enumerate([512, 512, 256, 128]):
        for j in range(3):
            macs += res(prev if j == 0 else ch, ch, px)
        prev = ch
        if i < 3:
            px *= 4
            macs += conv(ch, ch, 3, px)
    return 2 * (macs + conv(128, 3, 3, px))


def timed(fn, min_seconds=1.0, min_iters=3):
    """Mean wall time of fn() in ms over at least min_iters calls and min_seconds, after a warm-up."""
    fn()
    iters, start = 0, time.perf_counter()
    while iters < min_iters or time.perf_counter() - start < min_seconds:
        fn()
        iters += 1
    return (time.perf_counter() - start) / iters * 1e3


def emit(name, ms, flops, **extra):
    print(json.dumps({"name": name, "ms": round(ms, 3), "gflops": round(flops / ms / 1e6, 2), **extra}),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="sd-kl folder written by `twinpath model init`")
    ap.add_argument("--out", required=True, help="folder for latent.npy and decode_f64.npy")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="ceiling,conv,linear,decode")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    only = set(args.only.split(","))
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        if "ceiling" in only:
            a, b = torch.rand(2048, 2048, generator=gen), torch.rand(2048, 2048, generator=gen)
            emit("ceiling mm 2048^3", timed(lambda: torch.mm(a, b)), 2.0 * 2048**3)
        if "conv" in only:
            for where, cin, cout, k, s, h, w, asym in CONV_SHAPES:
                x = torch.rand(1, cin, h, w, generator=gen) * 2 - 1
                wt = torch.rand(cout, cin, k, k, generator=gen) * 2 - 1
                bias = torch.rand(cout, generator=gen)
                if asym:
                    run = lambda: F.conv2d(F.pad(x, (0, 1, 0, 1)), wt, bias, stride=s)
                else:
                    run = lambda: F.conv2d(x, wt, bias, stride=s, padding=k // 2)
                flops = 2.0 * cin * cout * k * k * (h // s) * (w // s)
                emit("conv " + where, timed(run), flops)
        if "linear" in only:
            for where, tokens, din, dout in LINEAR_SHAPES:
                lin = torch.nn.Linear(din, dout)
                x = torch.rand(1, tokens, din, generator=gen)
                emit("linear " + where, timed(lambda: lin(x)), 2.0 * tokens * din * dout)
        if "decode" in only or "decode-time" in only:
            from diffusers import AutoencoderKL

            vae = AutoencoderKL.from_pretrained(args.model).eval()
            latent = torch.from_numpy(np.random.default_rng(0).standard_normal((1, 4, 32, 32)))
            np.save(f"{args.out}/latent.npy", latent.float().numpy())
            run = lambda: vae.decode(latent.float()).sample
            ms = timed(run, min_seconds=5.0)
            if "decode" not in only:  # decode-time: the time alone (bench-peer.sh's paired rounds)
                emit("decode sd-kl 256^2", ms, decoder_flops(256))
                return
            out32 = run().double()
            out64 = vae.double().decode(latent).sample
            np.save(f"{args.out}/decode_f64.npy", out64.numpy())
            rel = float(torch.linalg.vector_norm(out32 - out64) / torch.linalg.vector_norm(out64))
            emit("decode sd-kl 256^2", ms, decoder_flops(256), rel_l2_vs_f64=rel)


if __name__ == "__main__":
    main()
