#!/usr/bin/env bash
# Measures how close clean runs come to the tolerance table: every dtype policy x the built-in
# tiny VAEs x encode/decode/roundtrip, the tiny UNets x unet.step (64x64, and the odd 15x17
# latent; the UNets' N-d ops have no acc=f16 kernels) and tiny-unet-xl's 3-step sdxl.denoise and
# sdxl.txt2img (family "sdxl"), then the worst error/tolerance ratio per (family, policy, op class)
# from the HDF5 report (local error for layers and for each step alone, accumulated for outputs).
# docs/tolerances.md records its output; rerun it after changing a factor or a kernel.
#   tools/calibrate-tolerances.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for pol in "w=f16 a=f16 acc=f32" "w=bf16 a=bf16 acc=f32" "w=f8e4m3 a=f16 acc=f32" "w=f8e5m2 a=bf16 acc=f32" \
           "w=f32 a=f32 acc=f32" "w=f16 a=f16 acc=f16"; do
  for model in tiny-kl tiny-taesd; do
    for pipeline in vae.decode vae.encode vae.roundtrip; do echo "$pipeline model=$model res=64x64 $pol"; done
  done
  if [[ "$pol" != *acc=f16* ]]; then
    echo "unet.step model=tiny-unet,tiny-unet-xl res=64x64,120x136 $pol"
    echo "sdxl.denoise model=tiny-unet-xl res=64x64,120x136 steps=3 $pol"
    echo "sdxl.txt2img model=tiny-unet-xl vae=tiny-kl res=64x64 steps=3 $pol"
  fi
done > "$work/suite.txt"
"$build/twinpath" run --suite "$work/suite.txt" --report "$work/calibration.h5" | tail -1
/usr/bin/python3 - "$work/calibration.h5" <<'PY'
import collections, sys, h5py
worst = collections.defaultdict(float)
with h5py.File(sys.argv[1], "r") as f:
    for key in f["cases"]:
        case = f["cases"][key]
        policy = " ".join(t for t in case.attrs["id"].split() if t.split("=")[0] in ("w", "a", "acc"))
        family = {"unet.": "unet", "sdxl.": "sdxl"}.get(case.attrs["id"][:5], "vae")
        for r in case["checkpoints"][:]:
            cls = r["op_class"].decode()
            err = r["local_rel_l2"] if r["has_local"] else r["rel_l2"]
            worst[(family, policy, cls)] = max(worst[(family, policy, cls)], err / r["tol_rel_l2"])
print(f"{'family':6} {'policy':24} {'op class':12} worst error / tolerance")
for (family, policy, cls), ratio in sorted(worst.items()):
    print(f"{family:6} {policy:24} {cls:12} {ratio:.3f}")
PY
