"""Makes tests/fixtures/activations/*.safetensors: dumps of diffusers itself, by
tools/dump_activations.py, for the tests of `twinpath triage --activations`.

    bash tools/make-activation-fixtures.sh      (makes the model folders, then runs this)

Each dump is of a model folder `twinpath model init` writes (configs beside the fixtures, seeded
weights; the tests write the same folders), run by diffusers on the CPU:
  kl-f32, kl-f16            clean AutoencoderKL decodes (the first in fp32, the second in fp16)
  kl-overflow-f16           decoder.up_blocks.0.resnets.0.conv2's weights scaled so its fp16
                            output overflows (the SDXL-VAE failure)
  unet-f16                  a clean UNet call in fp16
  unet-attention-f16        the same with one attention's scale broken by a monkeypatch
                            (diffusers' classic AttnProcessor, which reads attn.scale)
  unet-fp8, unet-fp8-clipped  under diffusers' layerwise fp8 casting (e4m3 storage, bf16
                            compute); in the second one linear's weights pass e4m3's 448
  wan-f16, wan-overflow-f16  WanTransformer3DModel (tiny-wan) loaded with
                            from_pretrained(torch_dtype=float16), its _keep_in_fp32_modules in
                            fp32; in the second blocks.1.ffn.net.0.proj's weights are scaled so
                            its fp16 output overflows
  wan-fp8                   tiny-wan in bf16 under layerwise fp8 casting (the block Linears)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_activations import ActivationDump, run  # noqa: E402

ATTENTION = "down_blocks.0.attentions.0.transformer_blocks.0.attn1"


def dump(model, pipeline, dtype, inputs, out, layerwise_fp8=False, check=None, cast=True):
    """`cast`: the model is cast to `dtype` here (else it was loaded in it)."""
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    model = (model.to(torch_dtype) if cast else model).eval()
    if layerwise_fp8:
        model.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch_dtype)
    with ActivationDump(model, pipeline, dtype, layerwise_fp8=layerwise_fp8) as d:
        used = run(model, pipeline, inputs, dtype)
    if check:
        check(d.tensors)
    n = d.save(out, used)
    print(f"{os.path.basename(out)}: {n} tensors")


def non_finite(key):
    def check(tensors):
        if torch.isfinite(tensors[key].float()).all():
            raise SystemExit(f"make_activation_fixtures: {key} stayed finite; raise the factor")
    return check


def main(work, out):
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from diffusers.models.attention_processor import AttnProcessor

    g = torch.Generator().manual_seed(11)
    latents = {"latents": torch.randn(1, 4, 6, 8, generator=g)}
    unet_inputs = {
        "sample": torch.randn(1, 4, 8, 8, generator=g),
        "timestep": torch.tensor([500.0]),
        "encoder_hidden_states": torch.randn(1, 6, 12, generator=g),
    }
    kl = lambda name: AutoencoderKL.from_pretrained(os.path.join(work, name))  # noqa: E731
    unet = lambda name: UNet2DConditionModel.from_pretrained(os.path.join(work, name))  # noqa: E731

    dump(kl("kl"), "vae.decode", "f32", latents, f"{out}/kl-f32.safetensors")
    dump(kl("kl"), "vae.decode", "f16", latents, f"{out}/kl-f16.safetensors")
    dump(kl("kl-overflow"), "vae.decode", "f16", latents, f"{out}/kl-overflow-f16.safetensors",
         check=non_finite("decoder.up_blocks.0.resnets.0.conv2/output"))

    dump(unet("unet"), "unet.step", "f16", unet_inputs, f"{out}/unet-f16.safetensors")
    broken = unet("unet")
    attn = broken.get_submodule(ATTENTION)
    attn.set_processor(AttnProcessor())
    attn.scale = attn.scale * 1e6  # the scores leave f16's range: softmax of inf rows is NaN
    dump(broken, "unet.step", "f16", unet_inputs, f"{out}/unet-attention-f16.safetensors",
         check=non_finite(f"{ATTENTION}/output"))

    dump(unet("unet"), "unet.step", "bf16", unet_inputs, f"{out}/unet-fp8.safetensors",
         layerwise_fp8=True)
    dump(unet("unet-fp8-clipped"), "unet.step", "bf16", unet_inputs,
         f"{out}/unet-fp8-clipped.safetensors", layerwise_fp8=True)
    wan_fixtures(work, out)


def wan_fixtures(work, out):
    from diffusers import WanTransformer3DModel

    def wan(name, dtype):
        return WanTransformer3DModel.from_pretrained(os.path.join(work, name), torch_dtype=dtype)

    g = torch.Generator().manual_seed(13)
    wan_inputs = {
        "hidden_states": torch.randn(1, 16, 3, 8, 8, generator=g),
        "timestep": torch.tensor([500.0]),
        "encoder_hidden_states": torch.randn(1, 24, 32, generator=g),
    }
    dump(wan("wan", torch.float16), "wan.step", "f16", wan_inputs, f"{out}/wan-f16.safetensors",
         cast=False)
    dump(wan("wan-overflow", torch.float16), "wan.step", "f16", wan_inputs,
         f"{out}/wan-overflow-f16.safetensors", cast=False,
         check=non_finite("blocks.1.ffn.net.0.proj/output"))
    dump(wan("wan", torch.bfloat16), "wan.step", "bf16", wan_inputs, f"{out}/wan-fp8.safetensors",
         layerwise_fp8=True, cast=False)


if __name__ == "__main__":
    # A third argument "wan" remakes only the Wan dumps.
    (wan_fixtures if sys.argv[3:] == ["wan"] else main)(sys.argv[1], sys.argv[2])
