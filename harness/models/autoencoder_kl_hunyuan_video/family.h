// diffusers' AutoencoderKLHunyuanVideo (HunyuanVideo's causal 3-D VAE): its family. Pipelines:
// video.encode, video.decode, video.roundtrip, untiled and not framewise.
#pragma once

#include "harness/models/family.h"

namespace tp {

const Family& autoencoder_kl_hunyuan_video_family();

}  // namespace tp
