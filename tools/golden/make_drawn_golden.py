"""Writes diffusers' outputs on drawn configs (issue 43): for each family and seed, the model
`twinpath model init --random FAMILY:SEED --seed 0` writes (config and weights drawn by twinpath,
loaded here with diffusers' own from_pretrained), and <out>/<family>-<seed>.safetensors with
  for a VAE: image [1,3,H,W] in [-1,1] and latent [1,L,H/d,W/d] (float32, seeded), and
  diffusers' float64 outputs rounded to float32: encode.mean and encode.logvar (AutoencoderKL)
  or encode.latents (AutoencoderTiny), and decode.sample;
  for WanTransformer3DModel: hidden_states [1,C,3,6,8], timestep [1] and encoder_hidden_states
  [1,8,text_dim] (seeded), and step.sample, the transformer's float64 output (diffusers keeps
  its float32 casts) rounded to float32;
  for AutoencoderKLHunyuanVideo: video [1,C,5,16,24] in [-1,1] and latent [1,L,2,16/r,24/r],
  and encode.mean, encode.logvar and decode.sample in float64 rounded to float32 (5 frames: below
  the framewise threshold, and untiled);
  for UNet2DConditionModel: sample [1,C,6,10] (not a multiple of the levels' downscale: diffusers
  forwards upsample_size), timestep [1], encoder_hidden_states [1,8,cross_attention_dim] and for
  text_time text_embeds and time_ids [1,6] (seeded), and step.sample in float64 rounded to
  float32.
The test (tests/drawn_golden_test.cpp) draws the same models again, so no weights are stored.
Usage: make_drawn_golden.py TWINPATH OUT_DIR SEEDS_PER_FAMILY
"""
import os
import subprocess
import sys
import tempfile

import torch
from diffusers import (AutoencoderKL, AutoencoderKLHunyuanVideo, AutoencoderTiny,
                       UNet2DConditionModel, WanTransformer3DModel)
from safetensors.torch import save_file

CLASSES = {"autoencoder_kl": AutoencoderKL, "autoencoder_tiny": AutoencoderTiny,
           "wan_transformer_3d": WanTransformer3DModel,
           "autoencoder_kl_hunyuan_video": AutoencoderKLHunyuanVideo,
           "unet_2d_condition": UNet2DConditionModel}
SIZE = 32  # every draw's downscale (at most 8) divides it


def outputs(vae, family, image, latent):
    vae = vae.to(torch.float64)
    with torch.no_grad():
        out = {}
        if family == "autoencoder_kl":
            post = vae.encode(image.double()).latent_dist
            out["encode.mean"], out["encode.logvar"] = post.mean, post.logvar
        else:
            out["encode.latents"] = vae.encode(image.double()).latents
        out["decode.sample"] = vae.decode(latent.double()).sample
    return {k: v.float().contiguous() for k, v in out.items()}


def wan_tensors(model, g):
    c = model.config
    inputs = {"hidden_states": torch.randn(1, c["in_channels"], 3, 6, 8, generator=g),
              "timestep": torch.tensor([float(torch.randint(1, 1000, (1,), generator=g))]),
              "encoder_hidden_states": torch.randn(1, 8, c["text_dim"], generator=g)}
    with torch.no_grad():
        m = model.to(torch.float64)
        out = m(inputs["hidden_states"].double(), inputs["timestep"],
                inputs["encoder_hidden_states"].double(), return_dict=False)[0]
    return {**inputs, "step.sample": out.float().contiguous()}


def video_vae_tensors(vae, g):
    c = vae.config
    r = c["spatial_compression_ratio"]
    video = (torch.rand(1, c["in_channels"], 5, 16, 24, generator=g) * 2 - 1).float()
    latent = torch.randn(1, c["latent_channels"], 2, 16 // r, 24 // r, generator=g).float()
    vae.use_tiling = False
    vae = vae.to(torch.float64)
    with torch.no_grad():
        post = vae.encode(video.double()).latent_dist
        out = {"encode.mean": post.mean, "encode.logvar": post.logvar,
               "decode.sample": vae.decode(latent.double()).sample}
    return {"video": video, "latent": latent,
            **{k: v.float().contiguous() for k, v in out.items()}}


def unet_tensors(model, g):
    c = model.config
    inputs = {"sample": torch.randn(1, c["in_channels"], 6, 10, generator=g),
              "timestep": torch.tensor([float(torch.randint(1, 1000, (1,), generator=g))]),
              "encoder_hidden_states": torch.randn(1, 8, c["cross_attention_dim"], generator=g)}
    added = None
    if c.get("addition_embed_type") == "text_time":
        text = c["projection_class_embeddings_input_dim"] - 6 * c["addition_time_embed_dim"]
        inputs["text_embeds"] = torch.randn(1, text, generator=g)
        inputs["time_ids"] = torch.tensor([[48.0, 80.0, 0.0, 0.0, 48.0, 80.0]])
        added = {"text_embeds": inputs["text_embeds"].double(),
                 "time_ids": inputs["time_ids"].double()}
    with torch.no_grad():
        m = model.to(torch.float64)
        out = m(inputs["sample"].double(), inputs["timestep"].double(),
                inputs["encoder_hidden_states"].double(), added_cond_kwargs=added,
                return_dict=False)[0]
    return {**inputs, "step.sample": out.float().contiguous()}


TENSORS = {"wan_transformer_3d": wan_tensors, "autoencoder_kl_hunyuan_video": video_vae_tensors,
           "unet_2d_condition": unet_tensors}


def make(twinpath, family, seed, out_dir):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([twinpath, "model", "init", "--random", f"{family}:{seed}", "--out", d],
                       check=True, stdout=subprocess.DEVNULL)
        model = CLASSES[family].from_pretrained(d).eval()
    g = torch.Generator().manual_seed(1000 * seed + len(family))
    if family in TENSORS:
        save_file(TENSORS[family](model, g), os.path.join(out_dir, f"{family}-{seed}.safetensors"))
        return
    vae = model
    down = 2 ** (len(vae.config.get("block_out_channels") or vae.config["num_encoder_blocks"]) - 1)
    image = (torch.rand(1, 3, SIZE, SIZE, generator=g) * 2 - 1).float()
    latent = torch.randn(1, vae.config["latent_channels"], SIZE // down, SIZE // down,
                         generator=g).float()
    tensors = {"image": image, "latent": latent, **outputs(vae, family, image, latent)}
    save_file(tensors, os.path.join(out_dir, f"{family}-{seed}.safetensors"))


def main():
    twinpath, out_dir, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out_dir, exist_ok=True)
    for family in CLASSES:
        for seed in range(1, seeds + 1):
            make(twinpath, family, seed, out_dir)
    print(f"wrote {len(CLASSES) * seeds} fixtures to {out_dir}")


if __name__ == "__main__":
    main()
