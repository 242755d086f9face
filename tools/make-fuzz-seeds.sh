#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora (tests/fuzz/corpus/NAME/): small valid files of every kind
# each parser reads, made by twinpath itself and by Debian's python3 (numpy, zlib). Run by hand
# after a format changes; the result is committed. Needs a build (bash tools/build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp=$root/build/twinpath
corpus=$root/tests/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Seeds no valid file is (issue 42): JSON nested past the reader's limit, lines and names past
# the system's, numbers past double's range, bytes that are not UTF-8; and for the targets that
# run further, a repro of an overflow and case lines through input generation.
hostile_seeds() {
  local c=$1 w=$2
  /usr/bin/python3 - "$c" <<'PY'
import json, struct, sys
c = sys.argv[1]
deep = "[" * 3000 + "]" * 3000
open(f"{c}/model_config/deep.json", "w").write('{"_class_name": "AutoencoderKL", "x": ' + deep + "}")
open(f"{c}/model_config/huge-numbers.json", "w").write(
    '{"_class_name": "AutoencoderKL", "block_out_channels": [1e400, -1e400, 18446744073709551617]}')
header = ('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": ' + deep + "}").encode()
open(f"{c}/safetensors/deep-header.safetensors", "wb").write(struct.pack("<Q", len(header)) + header + b"\0" * 4)
meta = '{"__metadata__": {"format": "pt", "note": "\\u00ff"}}'.encode() + b" " * 4
open(f"{c}/safetensors/metadata.safetensors", "wb").write(struct.pack("<Q", len(meta)) + meta)
npy = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" + " " * 20000 + "\n"
open(f"{c}/npy/padded.npy", "wb").write(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(npy)) + npy.encode() + b"\0" * 8)
for name, line in {"long-model": "vae.decode model=" + "m" * 5000 + " res=64x64 w=f16 a=f16 acc=f32",
                   "huge-sigma": "vae.decode model=tiny-kl res=64x64 w=f16 a=f16 acc=f32 input=normal*1e400",
                   "not-utf8": "vae.decode model=tiny-kl\udcff res=64x64 w=f16 a=f16 acc=f32"}.items():
    open(f"{c}/case_line/{name}.txt", "wb").write(line.encode("utf-8", "surrogateescape"))
for name, line in {"tiny-kl": "vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32 input=normal*3",
                   "stress": "vae.encode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32 input=dc*4",
                   "image": "vae.roundtrip model=tiny-taesd res=32x32 w=f16 a=f16 acc=f32 input=image",
                   "video": "video.decode model=tiny-hv res=32x32 w=f16 a=f16 acc=f32 frames=5",
                   "unet": "unet.step model=tiny-unet res=32x32 w=f16 a=f16 acc=f32"}.items():
    open(f"{c}/case_input/{name}.txt", "w").write(line)
PY
  "$tp" model init --config tiny-kl --seed 4 \
    --scale-layer 'decoder.up_blocks.0.resnets.0.conv1*1e5' --out "$w/hot" > /dev/null
  "$tp" triage --model "$w/hot" --pipeline vae.decode --input "$w/latent.npy" \
    --policy w=f16,a=f16,acc=f32 --repro "$c/repro/overflow.safetensors" > /dev/null || true
}

rm -rf "$corpus"
mkdir -p "$corpus"/{safetensors,npy,png,model_config,case_line,suite,plan_file,baseline,h5_report}
mkdir -p "$corpus"/{repro,case_input}

# Model configs: every built-in, each family's.
for config in tiny-kl tiny-taesd tiny-unet tiny-unet-xl tiny-unet-xl-refiner sd-kl sdxl-base; do
  "$tp" model init --config "$config" --out "$work/$config" > /dev/null
  cp "$work/$config/config.json" "$corpus/model_config/$config.json"
done

# A latent, a decode's output and a saved plan (the plan file target's policy: w=f16,a=f16,acc=f32).
/usr/bin/python3 - "$work" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/latent.npy", rng.standard_normal((1, 4, 4, 4)).astype(np.float32))
PY
"$tp" exec --model "$work/tiny-kl" --pipeline vae.decode --path compiled:cpu --input "$work/latent.npy" \
  --output "$corpus/safetensors/decode.safetensors" --save-plan "$work/decode.plan" > /dev/null
cp "$work/decode.plan" "$corpus/plan_file/whole.plan"
sed -n 2p "$work/decode.plan" > "$corpus/plan_file/body.json"

# .npy of several dtypes, orders and ranks; .safetensors of several dtypes with metadata; PNGs of
# every colour type and depth the reader takes.
/usr/bin/python3 - "$corpus" <<'PY'
import json, numpy as np, struct, sys, zlib
c = sys.argv[1]
rng = np.random.default_rng(1)
for name, a in {"f32": rng.standard_normal((1, 3, 4, 4)).astype(np.float32),
                "f16": rng.standard_normal((2, 3)).astype(np.float16),
                "f64_fortran": np.asfortranarray(rng.standard_normal((3, 5))),
                "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
                "scalar": np.array(1.5, dtype=np.float32)}.items():
    np.save(f"{c}/npy/{name}.npy", a)

def safetensors(path, tensors, metadata):
    header, blob = {"__metadata__": metadata}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + blob)
safetensors(f"{c}/safetensors/dtypes.safetensors", {
    "a.weight": ("F32", [2, 2], np.ones(4, np.float32).tobytes()),
    "b.weight": ("F16", [3], np.arange(3, dtype=np.float16).tobytes()),
    "c.weight": ("BF16", [2], b"\x80\x3f\x00\x40"),
    "d.weight": ("F8_E4M3", [4], bytes([0x38, 0x40, 0xb8, 0x7e])),
    "e.weight": ("F64", [1], np.ones(1).tobytes()),
    "empty": ("F32", [0, 3], b""),
}, {"format": "pt"})

def png(path, width, height, colour, depth, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + r for r in rows)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0))
                           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for colour, channels, name in [(0, 1, "gray"), (2, 3, "rgb"), (4, 2, "gray_alpha"), (6, 4, "rgba")]:
    for depth in (8, 16):
        rows = [bytes((x * 37 + y * 11 + k) % 256 for x in range(4) for k in range(channels * depth // 8)) for y in range(3)]
        png(f"{c}/png/{name}{depth}.png", 4, 3, colour, depth, rows)
PY

# Case lines, suites, a baseline excerpt and a small report.
"$tp" cases list --suite ci 2> /dev/null | awk 'NR % 40 == 1' | head -24 > "$work/lines.txt"
"$tp" cases list --suite field-reports 2> /dev/null | head -8 >> "$work/lines.txt"
n=0
while IFS= read -r line; do
  printf '%s' "$line" > "$corpus/case_line/$n.txt"
  n=$((n + 1))
done < "$work/lines.txt"
for suite in ci field-reports nightly; do
  head -c 4000 "$root/cases/suites/$suite.txt" > "$corpus/suite/$suite.txt"
done
zcat "$root/cases/baselines/ci.txt.gz" | head -120 > "$corpus/baseline/ci-head.txt"
"$tp" run --case 'vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32' \
  --case 'vae.decode model=tiny-kl res=32x32 w=f16 a=f16 acc=f32 boost=decoder.conv_in*1e6' \
  --report "$corpus/h5_report/two-cases.h5" > /dev/null || true
"$tp" report baseline "$corpus/h5_report/two-cases.h5" --out "$corpus/baseline/two-cases.txt" > /dev/null
hostile_seeds "$corpus" "$work"
du -sh "$corpus"/*
