"""Dumps a diffusers model's per-module activations for `twinpath triage --activations`.

Every module's inputs and outputs (or those matching --modules), in their own dtype, keyed by the
module's path in the model (diffusers' state-dict names, which twinpath's checkpoints use), with
the pipeline's inputs, the model's config and the dtype settings, in one safetensors file.

Around your own model and call (any torch.nn.Module whose submodule names follow diffusers):

    from dump_activations import ActivationDump
    with ActivationDump(vae, pipeline="vae.decode", dtype="f16") as dump:
        image = vae.decode(latents).sample
    dump.save("dump.safetensors", inputs={"latents": latents})

Or for a diffusers model folder:

    bash tools/dump-venv.sh   # once: torch, diffusers, safetensors and numpy in .venv-dump/
    .venv-dump/bin/python tools/dump_activations.py --model DIR --pipeline vae.decode \\
        --input latents.npy --dtype f16 --out dump.safetensors

Without --input the tool makes the pipeline's inputs itself, seeded (--seed), at the image
resolution --res HxW (default 64x64), with the shapes twinpath's cases give them: a decoder's
latents [1, latent_channels, H/s, W/s] with s = 2^(len(block_out_channels) - 1) of the model's
config (encoder_block_out_channels for AutoencoderTiny), an encoder's image [1, in_channels, H, W],
a UNet's sample [1, in_channels, H/8, W/8], timestep 500, encoder_hidden_states [1, 77,
cross_attention_dim] and for SDXL's text_time conditioning text_embeds and time_ids; a Wan
transformer's hidden_states [1, in_channels, 3, H/8, W/8], timestep 500 and
encoder_hidden_states [1, 24, text_dim]. A model with _keep_in_fp32_modules (Wan) is loaded as
from_pretrained(torch_dtype=...) loads it: those modules stay fp32, as twinpath assumes. Your own
latents as a .npy: numpy.save("latents.npy", latents.float().cpu().numpy()) of that shape.

Needs torch, diffusers and safetensors (a venv of its own: tools/dump-venv.sh). Not used by
twinpath's build or tests, which read the files it writes.

The file: tensors "input/NAME" (the pipeline's inputs), "MODULE/input.I" and "MODULE/input.KEY"
(a module's tensor arguments), "MODULE/output", "MODULE/output.I" or "MODULE/output.FIELD" (its
tensor results). When the model itself is called more than once (a UNet once per denoising
step), its second and later calls' keys start with "stepK/" (K from 1; the first call has no
prefix); a module called again within one model call (diffusers' ResnetBlock2D calls its one
`nonlinearity` after norm1 and after norm2) has "callN/" before MODULE from its second call on.
Metadata: format "twinpath-activations 1", pipeline, dtype, layerwise_fp8, config (the model's
config as JSON), class_name, modules (the glob), classes (JSON: module path -> class name),
steps (the model's own calls), weights (JSON: parameter -> [numel, up to 8 of its values as
stored], which triage checks --model against), torch and diffusers versions.
"""
import argparse
import fnmatch
import json
import sys

FORMAT = "twinpath-activations 1"
DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
PIPELINES = ("vae.decode", "vae.encode", "unet.step", "wan.step")
WAN_FRAMES, WAN_TEXT_TOKENS = 3, 24  # the latent frames and text rows twinpath's cases give


def _tensors(value, prefix):
    """The tensors in a module's argument or result, named after prefix."""
    import torch

    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    if isinstance(value, (list, tuple)):
        out = []
        for i, item in enumerate(value):
            out += _tensors(item, f"{prefix}.{i}")
        return out
    if isinstance(value, dict):  # diffusers' BaseOutput is an OrderedDict of its fields
        out = []
        for key, item in value.items():
            out += _tensors(item, f"{prefix}.{key}")
        return out
    return []


class ActivationDump:
    """Forward hooks on every submodule of `model` whose path matches `modules` (a glob)."""

    def __init__(self, model, pipeline, dtype, modules="*", layerwise_fp8=False):
        if pipeline not in PIPELINES:
            raise ValueError(f"pipeline {pipeline!r} is not one of {', '.join(PIPELINES)}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        self.model, self.pipeline, self.dtype = model, pipeline, dtype
        self.modules, self.layerwise_fp8 = modules, layerwise_fp8
        self.tensors, self.classes, self.calls = {}, {}, {}
        self.steps = 0  # the model's own forward calls so far
        self.handles = []

    def __enter__(self):
        self.handles.append(self.model.register_forward_pre_hook(self._step))
        for name, module in self.model.named_modules():
            if name and fnmatch.fnmatchcase(name, self.modules):
                self.classes[name] = type(module).__name__
                self.handles.append(module.register_forward_hook(self._hook(name), with_kwargs=True))
        if len(self.handles) == 1:
            raise ValueError(f"--modules {self.modules!r} matches no module of the model")
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.handles = []
        return False

    def _step(self, module, args):
        # A new call of the model: module call counts start again (VAE methods such as decode do
        # not go through forward, so a VAE's dump is one step).
        self.steps += 1
        self.calls = {}

    def _hook(self, name):
        def hook(module, args, kwargs, output):
            n = self.calls.get(name, 0)
            self.calls[name] = n + 1
            key = name if n == 0 else f"call{n}/{name}"
            if self.steps > 1:
                key = f"step{self.steps - 1}/{key}"
            for i, arg in enumerate(args):
                for k, t in _tensors(arg, f"{key}/input.{i}"):
                    self._keep(k, t)
            for kw, arg in kwargs.items():
                for k, t in _tensors(arg, f"{key}/input.{kw}"):
                    self._keep(k, t)
            for k, t in _tensors(output, f"{key}/output"):
                self._keep(k, t)
        return hook

    def _keep(self, key, tensor):
        # safetensors stores each tensor once and contiguously: a copy on the CPU, in its own dtype.
        self.tensors[key] = tensor.detach().to("cpu").contiguous().clone()

    def save(self, path, inputs):
        """Writes the dump with the pipeline's inputs (name -> tensor, as `twinpath exec` names them)."""
        import diffusers
        import torch
        from safetensors.torch import save_file

        tensors = dict(self.tensors)
        for name, t in inputs.items():
            tensors[f"input/{name}"] = torch.as_tensor(t).detach().to("cpu").contiguous().clone()
        config = dict(getattr(self.model, "config", {}) or {})
        metadata = {
            "format": FORMAT,
            "pipeline": self.pipeline,
            "dtype": self.dtype,
            "layerwise_fp8": "e4m3" if self.layerwise_fp8 else "",
            "class_name": type(self.model).__name__,
            "config": json.dumps({"_class_name": type(self.model).__name__, **config}, default=str),
            "modules": self.modules,
            "classes": json.dumps(self.classes),
            "steps": str(max(self.steps, 1)),
            "weights": json.dumps(weight_fingerprint(self.model.state_dict())),
            "torch": torch.__version__,
            "diffusers": diffusers.__version__,
        }
        save_file(tensors, path, metadata=metadata)
        return len(tensors)


def fingerprint_positions(numel):
    """The elements a weight's fingerprint samples: k * numel // n for n = min(8, numel)."""
    n = min(8, numel)
    return [k * numel // n for k in range(n)]


def weight_fingerprint(state_dict):
    """{name: [numel, values...]} at fingerprint_positions, as the model stores them (fp8 under
    layerwise casting): `twinpath triage --activations` checks --model's weights against it."""
    out = {}
    for name, t in state_dict.items():
        flat = t.detach().reshape(-1)
        if not flat.is_floating_point() or flat.numel() == 0:
            continue
        values = flat.float()[fingerprint_positions(flat.numel())].tolist()
        out[name] = [flat.numel()] + [float(f"{v:.9g}") for v in values]
    return out


def _read_inputs(path):
    import numpy as np
    import torch

    if path.endswith(".npy"):
        return {"": torch.from_numpy(np.load(path))}
    from safetensors.torch import load_file

    return load_file(path)


def _pick(inputs, names, what):
    for n in names:
        if n in inputs:
            return n, inputs[n]
    if "" in inputs:  # a .npy holds one tensor
        return names[0], inputs[""]
    raise SystemExit(f"dump_activations: the input file has no {what} tensor; name it one of "
                     f"{', '.join(names)}")


def input_shapes(config, pipeline, height, width):
    """The shapes of the inputs the tool makes for `pipeline` at an HxW image, from the model's
    config (a dict), as twinpath's cases shape them; SystemExit when the size has none."""
    def divided(scale):
        if height % scale or width % scale:
            raise SystemExit(f"dump_activations: --res {height}x{width} is not a multiple of the "
                             f"model's {scale}x scale; use a multiple of {scale}")
        return height // scale, width // scale

    if pipeline in ("vae.decode", "vae.encode"):
        blocks = config.get("block_out_channels") or config.get("encoder_block_out_channels")
        if not blocks:
            raise SystemExit("dump_activations: the config has no block_out_channels: is it a VAE's?")
        if pipeline == "vae.encode":
            return {"sample": [1, config.get("in_channels", 3), height, width]}
        h, w = divided(2 ** (len(blocks) - 1))
        return {"latents": [1, config.get("latent_channels", 4), h, w]}
    h, w = divided(8)
    if pipeline == "wan.step":
        return {"hidden_states": [1, config.get("in_channels", 16), WAN_FRAMES, h, w],
                "timestep": [1], "encoder_hidden_states": [1, WAN_TEXT_TOKENS, config["text_dim"]]}
    shapes = {"sample": [1, config.get("in_channels", 4), h, w], "timestep": [1],
              "encoder_hidden_states": [1, 77, config["cross_attention_dim"]]}
    if config.get("addition_embed_type") == "text_time":
        text = config["projection_class_embeddings_input_dim"] - 6 * config["addition_time_embed_dim"]
        shapes.update({"text_embeds": [1, text], "time_ids": [1, 6]})
    return shapes


def made_inputs(config, pipeline, height, width, seed):
    """Seeded inputs of input_shapes' shapes: normal latents and samples, an image in [-1, 1]."""
    import torch

    g = torch.Generator().manual_seed(seed)
    made = {}
    for name, shape in input_shapes(config, pipeline, height, width).items():
        if name == "timestep":
            made[name] = torch.tensor([500.0])
        elif name == "time_ids":
            made[name] = torch.tensor([[height, width, 0, 0, height, width]], dtype=torch.float32)
        elif pipeline == "vae.encode":
            made[name] = torch.rand(shape, generator=g) * 2 - 1
        else:
            made[name] = torch.randn(shape, generator=g)
    return made


def _needs_venv(error):
    raise SystemExit(f"dump_activations: needs torch, diffusers and safetensors ({error.name} is "
                     "not installed here): run `bash tools/dump-venv.sh` once, then "
                     "`.venv-dump/bin/python tools/dump_activations.py ...`")


def run(model, pipeline, inputs, dtype):
    """Calls the model as twinpath's pipeline of that name does; returns the inputs it used."""
    import torch

    torch_dtype = getattr(torch, DTYPES[dtype])
    with torch.no_grad():
        if pipeline == "vae.decode":
            name, z = _pick(inputs, ["latents", "latent", "z", "mean"], "latent")
            model.decode(z.to(torch_dtype))
            return {"latents": z}
        if pipeline == "vae.encode":
            name, x = _pick(inputs, ["sample", "image"], "image")
            model.encode(x.to(torch_dtype))
            return {"sample": x}
        if pipeline == "wan.step":  # WanTransformer3DModel's arguments by name
            x = _pick(inputs, ["hidden_states"], "hidden_states")[1]
            timestep = _pick(inputs, ["timestep"], "timestep")[1]
            context = _pick(inputs, ["encoder_hidden_states"], "encoder_hidden_states")[1]
            model(x.to(torch_dtype), timestep, context.to(torch_dtype), return_dict=False)
            return {"hidden_states": x, "timestep": timestep, "encoder_hidden_states": context}
        # unet.step: diffusers' UNet arguments by name.
        sample = _pick(inputs, ["sample"], "sample")[1]
        timestep = _pick(inputs, ["timestep"], "timestep")[1]
        context = _pick(inputs, ["encoder_hidden_states"], "encoder_hidden_states")[1]
        added = {k: inputs[k].to(torch_dtype) for k in ("text_embeds", "time_ids") if k in inputs}
        model(sample.to(torch_dtype), timestep, context.to(torch_dtype),
              added_cond_kwargs=added or None)
        used = {"sample": sample, "timestep": timestep, "encoder_hidden_states": context}
        used.update({k: inputs[k] for k in added})
        return used


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a diffusers model folder (config.json + weights)")
    p.add_argument("--pipeline", required=True, choices=PIPELINES)
    p.add_argument("--input", help=".safetensors or .npy, tensors named as in twinpath exec; "
                   "default: seeded inputs made at --res (see the tool's docstring)")
    p.add_argument("--res", default="64x64", help="HxW image pixels of made inputs (default 64x64)")
    p.add_argument("--seed", type=int, default=0, help="seed of made inputs (default 0)")
    p.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    p.add_argument("--layerwise-fp8", action="store_true",
                   help="diffusers' enable_layerwise_casting(storage float8_e4m3fn, compute --dtype)")
    p.add_argument("--modules", default="*", help="glob of module paths to dump (default every module)")
    p.add_argument("--out", required=True, help="the dump, a .safetensors file")
    a = p.parse_args(argv)
    try:
        height, width = (int(v) for v in a.res.lower().split("x"))
    except ValueError:
        raise SystemExit(f"dump_activations: --res {a.res} is not HxW, e.g. --res 64x64")
    try:
        import torch
        import diffusers
        import safetensors  # noqa: F401 (save() needs it; say so before the model loads)
    except ImportError as e:
        _needs_venv(e)

    try:
        with open(f"{a.model}/config.json") as f:
            config = json.load(f)
        class_name = config["_class_name"]
    except (OSError, KeyError, ValueError) as e:
        raise SystemExit(f"dump_activations: {a.model}/config.json cannot be read ({e}); "
                         "give a diffusers model folder")
    cls = getattr(diffusers, class_name, None)
    if cls is None:
        raise SystemExit(f"dump_activations: diffusers has no class {class_name!r}")
    model = cls.from_pretrained(a.model, torch_dtype=getattr(torch, DTYPES[a.dtype])).eval()
    if a.layerwise_fp8:
        model.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn,
                                       compute_dtype=getattr(torch, DTYPES[a.dtype]))
    if a.input:
        inputs = _read_inputs(a.input)
    else:
        inputs = made_inputs(config, a.pipeline, height, width, a.seed)
        print("dump_activations: made inputs " +
              ", ".join(f"{k} {list(v.shape)}" for k, v in inputs.items()))
    with ActivationDump(model, a.pipeline, a.dtype, a.modules, a.layerwise_fp8) as dump:
        used = run(model, a.pipeline, inputs, a.dtype)
    n = dump.save(a.out, used)
    print(f"dump_activations: {len(dump.classes)} modules, {n} tensors -> {a.out}")


if __name__ == "__main__":
    sys.exit(main())
