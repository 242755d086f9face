"""Writes golden inputs and diffusers outputs for small random-weight UNet2DConditionModels.

For each model: <out>/<name>/config.json, diffusion_pytorch_model.safetensors (f32 weights) and
io.safetensors with diffusers' UNet arguments
  sample [2,4,h,w]  timestep []  encoder_hidden_states [2,L,Dc]  (text_time: text_embeds [2,Dt],
  time_ids [2,n])
and outputs
  out.f64: unet(...) with the model in float64 (diffusers keeps its float32 timestep sinusoid)
  out.f32: the same in float32
and for tiny-unet-xl, io_denoise.safetensors: StableDiffusionXLPipeline's denoising loop
(EulerDiscreteScheduler as SDXL configures it, output_type="latent", text encoders bypassed
with prompt_embeds) over 3 steps with guidance 5 (latents.guided.f64/.f32) and 2 steps without
guidance (latents.unguided.f64/.f32), from latents, prompt_embeds, pooled_prompt_embeds,
negative_prompt_embeds, negative_pooled_prompt_embeds; and tiny-unet-xl-refiner/ with
io_base_refiner.safetensors: the base with denoising_end, the refiner with denoising_start, one
VAE (tests/fixtures/golden/tiny-kl) decoding both.
Run by tools/make-unet-golden-fixtures.sh in a venv with PyPI's torch and diffusers 0.42.1.
"""
import os
import sys

import torch
from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
from safetensors.torch import save_file

from seeded_weights import randomize

# EulerDiscreteScheduler as SDXL's scheduler_config.json sets it.
SCHEDULER = dict(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                 num_train_timesteps=1000, steps_offset=1, timestep_spacing="leading",
                 prediction_type="epsilon", interpolation_type="linear", use_karras_sigmas=False)

MODELS = {
    # twinpath's built-in tiny-unet (SD 1.5-like: conv projections, 3 levels) at an odd latent
    # size: 15x17 takes the explicit-size upsample path (up factor 4).
    "tiny-unet": (dict(sample_size=16, down_block_types=["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
                       up_block_types=["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
                       block_out_channels=[8, 16, 16], layers_per_block=2, attention_head_dim=2,
                       cross_attention_dim=16, norm_num_groups=4, use_linear_projection=False),
                  (15, 17), 667.0, 7),
    # twinpath's built-in tiny-unet-xl (SDXL-like: text_time, linear projections, 2 layers).
    "tiny-unet-xl": (dict(sample_size=16, down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"],
                          up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"], block_out_channels=[16, 32],
                          layers_per_block=2, transformer_layers_per_block=[1, 2], attention_head_dim=[2, 4],
                          cross_attention_dim=32, norm_num_groups=8, use_linear_projection=True,
                          addition_embed_type="text_time", addition_time_embed_dim=8,
                          projection_class_embeddings_input_dim=80),
                     (16, 16), 334.0, 9),
    # Not built in: refiner-like 5 time ids, conv projections with text_time, per-level layers,
    # 1 head of dim 16, freq_shift 1 without the sin/cos flip, downsample padding 0, a mid block
    # scale, and a latent that is odd at the second level (10x14 -> 5x7).
    "unet-mixed": (dict(sample_size=16, down_block_types=["CrossAttnDownBlock2D", "DownBlock2D", "CrossAttnDownBlock2D"],
                        up_block_types=["CrossAttnUpBlock2D", "UpBlock2D", "CrossAttnUpBlock2D"],
                        block_out_channels=[16, 16, 32], layers_per_block=[1, 2, 1],
                        transformer_layers_per_block=[2, 1, 1], attention_head_dim=[1, 2, 4],
                        cross_attention_dim=24, norm_num_groups=8, use_linear_projection=False,
                        addition_embed_type="text_time", addition_time_embed_dim=4,
                        projection_class_embeddings_input_dim=32, flip_sin_to_cos=False, freq_shift=1,
                        downsample_padding=0, mid_block_scale_factor=1.5),
                   (10, 14), 999.0, 5),
}


def main(out_root):
    torch.manual_seed(0)
    for name, (config, (h, w), t, tokens) in MODELS.items():
        model = UNet2DConditionModel(**config).eval()
        randomize(model, seed=sum(map(ord, name)))
        folder = os.path.join(out_root, name)
        os.makedirs(folder, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        g = torch.Generator().manual_seed(7)
        cfg = model.config
        inputs = {
            "sample": torch.randn(2, 4, h, w, generator=g),
            "timestep": torch.tensor(t, dtype=torch.float32),
            "encoder_hidden_states": torch.randn(2, tokens, cfg.cross_attention_dim, generator=g),
        }
        added = {}
        if cfg.addition_embed_type == "text_time":
            n_ids = 6 if cfg.projection_class_embeddings_input_dim == 80 else 5
            text_dim = cfg.projection_class_embeddings_input_dim - n_ids * cfg.addition_time_embed_dim
            inputs["text_embeds"] = torch.randn(2, text_dim, generator=g)
            ids = [8.0 * h, 8.0 * w, 0.0, 0.0, 8.0 * h, 8.0 * w][:n_ids]
            if n_ids == 5:
                ids[4] = 6.0  # the refiner's aesthetic score
            inputs["time_ids"] = torch.tensor([ids, ids], dtype=torch.float32)
            added = {"text_embeds": inputs["text_embeds"], "time_ids": inputs["time_ids"]}
        io = {k: v.contiguous() for k, v in inputs.items()}
        with torch.no_grad():
            for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
                m = model.to(dtype)
                out = m(inputs["sample"].to(dtype), inputs["timestep"],
                        encoder_hidden_states=inputs["encoder_hidden_states"].to(dtype),
                        added_cond_kwargs={k: v.to(dtype) for k, v in added.items()} or None).sample
                io["out." + suffix] = out.contiguous()
        save_file(io, os.path.join(folder, "io.safetensors"))
        print(name, {k: list(v.shape) for k, v in io.items()})


def pipeline_inputs(seed, batch, latent, tokens, dim=32):
    """The SDXL pipeline's tensor arguments, seeded: initial noise and (negative) prompt and
    pooled embeddings of width `dim`."""
    g = torch.Generator().manual_seed(seed)
    return {
        "latents": torch.randn(batch, 4, *latent, generator=g),
        "prompt_embeds": torch.randn(batch, tokens, dim, generator=g),
        "pooled_prompt_embeds": torch.randn(batch, dim, generator=g),
        "negative_prompt_embeds": torch.randn(batch, tokens, dim, generator=g),
        "negative_pooled_prompt_embeds": torch.randn(batch, dim, generator=g),
    }


def denoise(folder):
    """SDXL's denoising loop on the fixture's UNet, float64 and float32."""
    unet = UNet2DConditionModel.from_pretrained(folder).eval()
    io = pipeline_inputs(11, batch=2, latent=(12, 10), tokens=9)
    for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
        pipe = StableDiffusionXLPipeline(vae=None, text_encoder=None, text_encoder_2=None,
                                         tokenizer=None, tokenizer_2=None, unet=unet.to(dtype),
                                         scheduler=EulerDiscreteScheduler(**SCHEDULER))
        pipe.set_progress_bar_config(disable=True)
        for name, steps, guidance in (("guided", 3, 5.0), ("unguided", 2, 1.0)):
            args = {k: v.to(dtype) for k, v in io.items() if k.endswith("embeds") or k == "latents"}
            if guidance <= 1:
                args = {k: v for k, v in args.items() if not k.startswith("negative")}
            out = pipe(**args, num_inference_steps=steps, guidance_scale=guidance,
                       height=12 * 8, width=10 * 8, output_type="latent").images
            io[f"latents.{name}.{suffix}"] = out.contiguous()
    io = {k: v.contiguous() for k, v in io.items()}
    save_file(io, os.path.join(folder, "io_denoise.safetensors"))
    print("denoise", {k: list(v.shape) for k, v in io.items()})


# twinpath's built-in tiny-unet-xl-refiner: the refiner's 5 time ids and a narrower context (the
# last 24 of the base's 32 prompt_embeds columns, as the refiner reads text_encoder_2's part).
REFINER = dict(sample_size=16, down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"],
               up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"], block_out_channels=[24, 48],
               layers_per_block=2, transformer_layers_per_block=2, attention_head_dim=[3, 6],
               cross_attention_dim=24, norm_num_groups=8, use_linear_projection=True,
               addition_embed_type="text_time", addition_time_embed_dim=8,
               projection_class_embeddings_input_dim=72)


def base_refiner(base_folder, refiner_folder, vae_folder):
    """SDXL's ensemble of expert denoisers: the base with denoising_end, then the refiner
    (StableDiffusionXLImg2ImgPipeline, requires_aesthetics_score) with denoising_start from the
    base's latents, one VAE shared by both; each pipeline's latents decoded as the pipelines do
    (vae.decode(latents / scaling_factor)). 6 steps split at 0.7, guidance 5."""
    from diffusers import AutoencoderKL, StableDiffusionXLImg2ImgPipeline
    refiner = UNet2DConditionModel(**REFINER).eval()
    randomize(refiner, seed=sum(map(ord, "tiny-unet-xl-refiner")))
    os.makedirs(refiner_folder, exist_ok=True)
    refiner.save_pretrained(refiner_folder, safe_serialization=True)
    base = UNet2DConditionModel.from_pretrained(base_folder).eval()
    vae = AutoencoderKL.from_pretrained(vae_folder).eval()
    io = pipeline_inputs(13, batch=1, latent=(8, 12), tokens=77)
    steps, split, guidance = 6, 0.7, 5.0
    for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
        with torch.no_grad():
            b, r, v = base.to(dtype), refiner.to(dtype), vae.to(dtype)
            args = {k: t.to(dtype) for k, t in io.items()}
            pipe = StableDiffusionXLPipeline(vae=v, text_encoder=None, text_encoder_2=None,
                                             tokenizer=None, tokenizer_2=None, unet=b,
                                             scheduler=EulerDiscreteScheduler(**SCHEDULER))
            pipe.set_progress_bar_config(disable=True)
            latents = pipe(**args, num_inference_steps=steps, guidance_scale=guidance,
                           denoising_end=split, height=8 * 8, width=12 * 8,
                           output_type="latent").images
            ref = StableDiffusionXLImg2ImgPipeline(
                vae=v, text_encoder=None, text_encoder_2=None, tokenizer=None, tokenizer_2=None,
                unet=r, scheduler=EulerDiscreteScheduler(**SCHEDULER),
                requires_aesthetics_score=True)
            ref.set_progress_bar_config(disable=True)
            refined = ref(image=latents, num_inference_steps=steps, guidance_scale=guidance,
                          denoising_start=split, output_type="latent",
                          prompt_embeds=args["prompt_embeds"][..., -24:],
                          negative_prompt_embeds=args["negative_prompt_embeds"][..., -24:],
                          pooled_prompt_embeds=args["pooled_prompt_embeds"],
                          negative_pooled_prompt_embeds=args["negative_pooled_prompt_embeds"]
                          ).images
            sf = v.config.scaling_factor
            io[f"base.latents.{suffix}"] = latents
            io[f"latents.{suffix}"] = refined
            io[f"base.sample.{suffix}"] = v.decode(latents / sf).sample
            io[f"sample.{suffix}"] = v.decode(refined / sf).sample
    io = {k: t.contiguous() for k, t in io.items()}
    save_file(io, os.path.join(refiner_folder, "io_base_refiner.safetensors"))
    print("base+refiner", {k: list(t.shape) for k, t in io.items()})


if __name__ == "__main__":
    main(sys.argv[1])
    denoise(os.path.join(sys.argv[1], "tiny-unet-xl"))
    base_refiner(os.path.join(sys.argv[1], "tiny-unet-xl"),
                 os.path.join(sys.argv[1], "tiny-unet-xl-refiner"),
                 os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "golden", "tiny-kl"))
