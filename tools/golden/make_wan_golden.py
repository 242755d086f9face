"""Writes golden inputs and diffusers outputs for small random-weight WanTransformer3DModels.

For each model: <out>/<name>/config.json, diffusion_pytorch_model.safetensors (f32 weights) and
io.safetensors with the transformer's arguments
  hidden_states [B,C,F,H,W]  timestep [B]  encoder_hidden_states [B,L,text_dim]
and outputs
  out.f64: transformer(...) with the model in float64 (diffusers keeps its float32 casts: the
           LayerNorm inputs, the sinusoid, the RoPE tables, temb.float(), f.float())
  out.f32: the same in float32
  out.bf16: from_pretrained(torch_dtype=bfloat16) (its _keep_in_fp32_modules stay float32),
            bfloat16 inputs
  out.layerwise: the same with enable_layerwise_casting(float8_e4m3fn storage, bfloat16 compute)
and for tiny-wan, io_denoise.safetensors: WanPipeline's denoising loop (FlowMatchEulerDiscrete-
Scheduler with shift 3, output_type="latent", the text encoder bypassed with prompt_embeds) over
3 steps with guidance 5 (latents.guided.f64/.f32) and 2 without (latents.unguided.f64/.f32),
from latents, prompt_embeds and negative_prompt_embeds.
Run by tools/make-wan-golden-fixtures.sh in a venv with PyPI's torch and diffusers 0.42.1 (the
version ../shared/docs/reference/dit-facts.md describes).
"""
import os
import sys

import torch
from diffusers import FlowMatchEulerDiscreteScheduler, WanTransformer3DModel
from safetensors.torch import save_file

from seeded_weights import randomize

MODELS = {
    # twinpath's built-in tiny-wan: dit-facts.md section 7, at an odd latent (9x7: the patch
    # drops a row and a column).
    "tiny-wan": (dict(patch_size=[1, 2, 2], num_attention_heads=2, attention_head_dim=16,
                      in_channels=16, out_channels=16, text_dim=32, freq_dim=32, ffn_dim=64,
                      num_layers=2, cross_attn_norm=True, eps=1e-6, rope_max_seq_len=32),
                 (1, 16, 3, 9, 7), [500.0], 8),
    # Not built in: a patch of (1,4,3) that divides neither side (10x7), 3 heads of dim 24
    # (RoPE split 8/8/8), out_channels unlike in_channels, no cross-attention norm, eps 1e-5.
    "wan-odd-patch": (dict(patch_size=[1, 4, 3], num_attention_heads=3, attention_head_dim=24,
                           in_channels=4, out_channels=8, text_dim=20, freq_dim=16, ffn_dim=96,
                           num_layers=1, cross_attn_norm=False, eps=1e-5, rope_max_seq_len=16),
                      (1, 4, 3, 10, 7), [333.0], 5),
    # Not built in: a temporal patch (2,2,2) over 5 frames (floor to 2), 4 heads of dim 12
    # (split 4/4/4), batch 2 with a timestep each, 3 layers.
    "wan-temporal-patch": (dict(patch_size=[2, 2, 2], num_attention_heads=4, attention_head_dim=12,
                                in_channels=8, out_channels=8, text_dim=24, freq_dim=64,
                                ffn_dim=40, num_layers=3, cross_attn_norm=True, eps=1e-6,
                                rope_max_seq_len=24),
                           (2, 8, 5, 8, 6), [250.0, 875.5], 6),
}


def one_call(model, inputs, dtype):
    with torch.no_grad():
        m = model.to(dtype)
        return m(inputs["hidden_states"].to(dtype), inputs["timestep"],
                 inputs["encoder_hidden_states"].to(dtype), return_dict=False)[0].contiguous()


def main(out_root):
    for name, (config, shape, timesteps, tokens) in MODELS.items():
        torch.manual_seed(0)
        model = WanTransformer3DModel(**config).eval()
        randomize(model, seed=sum(map(ord, name)))
        folder = os.path.join(out_root, name)
        os.makedirs(folder, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        g = torch.Generator().manual_seed(1)
        io = {
            "hidden_states": torch.randn(*shape, generator=g),
            "timestep": torch.tensor(timesteps, dtype=torch.float32),
            "encoder_hidden_states": torch.randn(shape[0], tokens, config["text_dim"], generator=g),
        }
        io["out.f64"] = one_call(model, io, torch.float64)
        io["out.f32"] = one_call(model, io, torch.float32)
        bf16 = WanTransformer3DModel.from_pretrained(folder, torch_dtype=torch.bfloat16).eval()
        io["out.bf16"] = one_call(bf16, io, torch.bfloat16)
        bf16.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn,
                                      compute_dtype=torch.bfloat16)
        io["out.layerwise"] = one_call(bf16, io, torch.bfloat16)
        save_file({k: v.contiguous() for k, v in io.items()}, os.path.join(folder, "io.safetensors"))
        print(name, {k: list(v.shape) for k, v in io.items()})


def denoise(folder):
    """WanPipeline's denoising loop on the fixture's transformer, float64 and float32."""
    from diffusers import WanPipeline
    transformer = WanTransformer3DModel.from_pretrained(folder).eval()
    g = torch.Generator().manual_seed(11)
    io = {
        "latents": torch.randn(1, 16, 2, 6, 8, generator=g),
        "prompt_embeds": torch.randn(1, 8, 32, generator=g),
        "negative_prompt_embeds": torch.randn(1, 8, 32, generator=g),
    }
    inputs = dict(io)
    for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
        pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=None,
                           transformer=transformer.to(dtype),
                           scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0))
        pipe.set_progress_bar_config(disable=True)
        for name, steps, guidance in (("guided", 3, 5.0), ("unguided", 2, 1.0)):
            args = {k: v.to(dtype) for k, v in inputs.items()}
            if guidance <= 1:
                args.pop("negative_prompt_embeds")
            out = pipe(**args, num_inference_steps=steps, guidance_scale=guidance,
                       height=6 * 8, width=8 * 8, num_frames=5, output_type="latent").frames
            io[f"latents.{name}.{suffix}"] = out.contiguous()
    save_file({k: v.contiguous() for k, v in io.items()},
              os.path.join(folder, "io_denoise.safetensors"))
    print("denoise", {k: list(v.shape) for k, v in io.items()})


if __name__ == "__main__":
    main(sys.argv[1])
    denoise(os.path.join(sys.argv[1], "tiny-wan"))
