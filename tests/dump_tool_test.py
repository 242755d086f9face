"""tools/dump_activations.py as a user meets it, run without site-packages (python3 -S), so
neither torch nor numpy is there: it names the venv script instead of a ModuleNotFoundError, and
the inputs it makes itself have the shapes twinpath's own cases give the same model.

    python3 -S tests/dump_tool_test.py TWINPATH_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import dump_activations  # noqa: E402 (the tool's top level imports the standard library only)


def check(condition, what):
    if not condition:
        raise SystemExit(f"dump_tool_test: FAILED: {what}")


def without_venv():
    r = subprocess.run([sys.executable, "-S", os.path.join(ROOT, "tools/dump_activations.py"),
                        "--model", "nowhere", "--pipeline", "vae.decode", "--out", "x.safetensors"],
                       capture_output=True, text=True)
    check(r.returncode == 1, f"exit code {r.returncode}: {r.stderr}")
    check("run `bash tools/dump-venv.sh` once" in r.stderr, r.stderr)
    check("Traceback" not in r.stderr, r.stderr)


def twinpath_input_shape(binary, folder, pipeline, model):
    """The input shape twinpath's own case gives `pipeline` at 64x64 (a stream= case reports it)."""
    r = subprocess.run([binary, "run", "--case", f"{pipeline} model={model} stream=64x64 w=f32 a=f32 "
                        "acc=f32", "--json", "--report", os.path.join(folder, "r.h5")],
                       capture_output=True, text=True, cwd=folder)
    check(r.returncode == 0, r.stdout + r.stderr)
    return json.loads(json.loads(r.stdout)["cases"][0]["stream"][0]["input_shape"])


def same_shapes_as_twinpath(binary):
    with tempfile.TemporaryDirectory() as folder:
        for model, pipeline, name in [("tiny-kl", "vae.decode", "latents"),
                                      ("tiny-kl", "vae.encode", "sample"),
                                      ("tiny-taesd", "vae.decode", "latents"),
                                      ("tiny-wan", "wan.step", "hidden_states"),
                                      ("tiny-unet-xl", "unet.step", "sample")]:
            out = os.path.join(folder, model)
            if not os.path.isdir(out):
                subprocess.run([binary, "model", "init", "--config", model, "--out", out],
                               check=True, capture_output=True)
            with open(os.path.join(out, "config.json")) as f:
                config = json.load(f)
            shapes = dump_activations.input_shapes(config, pipeline, 64, 64)
            want = twinpath_input_shape(binary, folder, pipeline, model)
            check(shapes[name] == want, f"{model} {pipeline}: {shapes[name]} != twinpath's {want}")
            print(f"{model} {pipeline}: {name} {shapes[name]}")
        check(shapes["time_ids"] == [1, 6] and shapes["text_embeds"][0] == 1, shapes)
    try:
        dump_activations.input_shapes({"block_out_channels": [8, 16, 32]}, "vae.decode", 63, 64)
        check(False, "--res 63x64 was accepted")
    except SystemExit as e:
        check("not a multiple of the model's 4x scale" in str(e), str(e))


if __name__ == "__main__":
    without_venv()
    same_shapes_as_twinpath(sys.argv[1])
    print("dump_tool_test: ok")
