#include "harness/models/autoencoder_kl_hunyuan_video/family.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "harness/core/rng.h"
#include "harness/models/autoencoder_kl_hunyuan_video/hv_config.h"
#include "harness/models/autoencoder_kl_hunyuan_video/hv_tiling.h"
#include "harness/models/option_parsers.h"
#include "harness/models/vae/tiling.h"

namespace tp {
namespace {

const HunyuanVideoVaeConfig& hv(const ModelConfig& c) {
  return dynamic_cast<const HunyuanVideoVaeConfig&>(c);
}

// Latent frames of a generated input when frames= is not given: 5 video frames.
constexpr int64_t kLatentFrames = 2;

int64_t latent_frames(const OptionValues& options) {
  const std::string v = given_option(options, "frames");
  int64_t n = kLatentFrames;
  if (!v.empty()) std::from_chars(v.data(), v.data() + v.size(), n);
  return n;
}

const char* const kEncode = "video.encode";
const char* const kDecode = "video.decode";
const char* const kRoundtrip = "video.roundtrip";

std::vector<PipelineDescriptor> video_pipelines() {
  PipelineDescriptor encode =
      describe_pipeline(kEncode, "video [B,C,T,H,W] in [-1,1] -> the posterior's mean, logvar",
                        {"sample"}, {"mean", "logvar"}, Produces::kLatents);
  PipelineDescriptor decode = describe_pipeline(kDecode, "latents [B,L,T',H/8,W/8] -> video",
                                                {"latents"}, {"sample"}, Produces::kImage);
  PipelineDescriptor roundtrip =
      describe_pipeline(kRoundtrip, "video -> encoder -> decoder of the mean -> video", {"sample"},
                        {"sample"}, Produces::kImage);
  roundtrip.handoff =
      Handoff{"video.encoder", "mean", "video.decoder", "encoder.", kEncode, kDecode};
  for (PipelineDescriptor* d : {&encode, &decode, &roundtrip}) {
    d->options = {"frames"};
    d->tiles = true;
    d->tiles_in_time = true;
  }
  decode.tradeoff_default = true;
  return {encode, decode, roundtrip};
}

const std::vector<PipelineOption>& video_options() {
  static const std::vector<PipelineOption> kOptions = {
      {"frames", "frames", "frames=N", std::to_string(kLatentFrames),
       "latent frames of a generated input (a video of 4(N-1)+1 frames through the VAE's 4x "
       "temporal downscale)",
       whole_number_option("frames=N", 1, 1024)},
  };
  return kOptions;
}

class HunyuanVideoVaeFamily : public Family {
 public:
  std::string class_name() const override { return "AutoencoderKLHunyuanVideo"; }

  Expected<std::shared_ptr<const ModelConfig>> parse_config(
      const nlohmann::json& config, const std::string& source) const override {
    TP_ASSIGN_OR_RETURN(HunyuanVideoVaeConfig c, parse_hunyuan_video_vae_config(config, source));
    return std::shared_ptr<const ModelConfig>(
        std::make_shared<HunyuanVideoVaeConfig>(std::move(c)));
  }

  std::vector<std::string> builtin_names() const override { return {"tiny-hv", "hunyuan-video"}; }
  const ConfigSpace* config_space() const override {
    return &autoencoder_kl_hunyuan_video_config_space();
  }
  std::string builtin_text(const std::string& name) const override {
    // tiny-hv: video-vae-facts 9 (tiny-hyv), seconds on the CPU. hunyuan-video: the shipped
    // vae/config.json, the constructor's defaults (video-vae-facts 1.2).
    if (name == "tiny-hv")
      return R"({"_class_name": "AutoencoderKLHunyuanVideo", "act_fn": "silu",
 "block_out_channels": [8, 8, 16, 16], "in_channels": 3, "latent_channels": 4,
 "layers_per_block": 1, "mid_block_add_attention": true, "norm_num_groups": 4, "out_channels": 3,
 "scaling_factor": 0.476986, "spatial_compression_ratio": 8, "temporal_compression_ratio": 4})";
    if (name == "hunyuan-video")
      return R"({"_class_name": "AutoencoderKLHunyuanVideo", "act_fn": "silu",
 "block_out_channels": [128, 256, 512, 512], "in_channels": 3, "latent_channels": 16,
 "layers_per_block": 2, "mid_block_add_attention": true, "norm_num_groups": 32,
 "out_channels": 3, "scaling_factor": 0.476986, "spatial_compression_ratio": 8,
 "temporal_compression_ratio": 4})";
    return "";
  }

  std::vector<Graph> graphs(const ModelConfig& c) const override {
    return {build_hunyuan_video_encoder_graph(hv(c)), build_hunyuan_video_decoder_graph(hv(c))};
  }

  const std::vector<PipelineDescriptor>& pipelines() const override {
    static const std::vector<PipelineDescriptor> kPipelines = video_pipelines();
    return kPipelines;
  }
  const std::vector<PipelineOption>& options() const override { return video_options(); }

  Expected<Shape> input_shape(const ModelConfig& config, const std::string& pipeline,
                              int64_t height, int64_t width,
                              const OptionValues& options) const override {
    const HunyuanVideoVaeConfig& c = hv(config);
    const int64_t ds = c.spatial_compression_ratio, latents = latent_frames(options);
    if (height % ds || width % ds)
      return Error("res=" + std::to_string(height) + "x" + std::to_string(width) +
                   " is not a multiple of the VAE's " + std::to_string(ds) +
                   "x downscale, so it has no latent size; use a multiple of " +
                   std::to_string(ds));
    if (pipeline == kDecode) return Shape{1, c.latent_channels, latents, height / ds, width / ds};
    return Shape{1, c.in_channels, c.video_frames(latents), height, width};
  }
  int64_t input_scale(const ModelConfig& config, const std::string& pipeline) const override {
    return pipeline == kDecode ? hv(config).spatial_compression_ratio : 1;
  }

  Expected<Tensor> select_input(const std::string& pipeline, const NamedTensors& tensors,
                                const std::string& source) const override {
    if (tensors.size() == 1) return tensors.front().second;
    const std::vector<std::string> names = pipeline == kDecode
                                               ? std::vector<std::string>{"latents", "z", "mean"}
                                               : std::vector<std::string>{"sample", "video"};
    for (const std::string& n : names)
      if (const Tensor* t = find_tensor(tensors, n)) return *t;
    return Error(source + ": " + pipeline + " reads the only tensor of a file, or one named " +
                 names.front() + "; the file has " + std::to_string(tensors.size()) +
                 " tensors and none of that name");
  }

  // [B, C, T, H, W] with the config's channels; a video's height and width multiples of the
  // downscale (the encoder's stride-2 convs would floor them, and the decoder not give them back).
  Status check_input(const Model& model, const std::string& pipeline,
                     const Tensor& x) const override {
    const HunyuanVideoVaeConfig& c = hv(*model.config);
    const bool decode = pipeline == kDecode;
    const int64_t channels = decode ? c.latent_channels : c.in_channels;
    if (x.rank() != 5 || x.dim(1) != channels || x.numel() == 0)
      return Error(pipeline + " takes " + (decode ? "latents" : "a video") + " of shape [batch, " +
                   std::to_string(channels) + ", frames, height, width], but it is " +
                   shape_string(x.shape()));
    const int64_t ds = c.spatial_compression_ratio;
    if (!decode && (x.dim(3) % ds || x.dim(4) % ds))
      return Error(pipeline + ": a video of " + std::to_string(x.dim(3)) + "x" +
                   std::to_string(x.dim(4)) + " pixels is not a multiple of the " +
                   std::to_string(ds) + "x downscale; crop or pad it to a multiple of " +
                   std::to_string(ds) + " (diffusers' pipelines require it)");
    return Status();
  }

  // Seeded: latents ~ N(0, sigma^2); a video ~ U(-1, 1) * sigma.
  Expected<Tensor> generate_input(const Model& model, const InputRequest& r,
                                  const GraphRunner&) const override {
    if (r.image)
      return Error(
          "input=image makes a picture, not a video; a video VAE case takes "
          "input=normal[*SIGMA] or a file");
    TP_ASSIGN_OR_RETURN(Shape shape,
                        input_shape(*model.config, r.pipeline, r.height, r.width, r.options));
    Tensor t(DType::kF32, shape);
    Rng rng(r.seed, "input");
    const bool latents = r.pipeline == kDecode;
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = float(latents ? rng.normal(r.sigma) : r.sigma * rng.uniform(-1, 1));
    return t;
  }

  // Tiled in space and in time as diffusers decides (hv_tiling.h): the streamed tiler on the
  // compiled path (which records its decisions), the plain one on the reference paths.
  Expected<NamedTensors> run(const Model& model, const std::string& pipeline,
                             const NamedTensors& inputs, GraphExecutor& executor,
                             const PipelineOptions& options) const override {
    TP_ASSIGN_OR_RETURN(Tensor input, select_input(pipeline, inputs, pipeline + "'s inputs"));
    TP_RETURN_IF_ERROR(check_input(model, pipeline, input));
    const HunyuanVideoVaeConfig& c = hv(*model.config);
    const Tensor x = input.to(input.dtype() == DType::kF64 ? DType::kF64 : DType::kF32);
    const HvStage first = pipeline == kDecode ? HvStage::kDecode : HvStage::kEncode;
    const bool roundtrip = pipeline == kRoundtrip;
    TP_ASSIGN_OR_RETURN(HvTiles t, hv_tiles(c, options.tiling));
    if (executor.streams_tiles() && (t.spatial || t.framewise))
      return run_hv_streamed_tiled(model, first, roundtrip, x, executor, options.tiling,
                                   options.stage_outputs);
    if (tiles_any(t, c, pipeline, x.shape()))
      return run_hv_plain_tiled(model, first, roundtrip, x, executor, t, options.stage_outputs);
    return run_hv_whole(model, first, roundtrip, x, executor, options.stage_outputs);
  }

  Expected<std::vector<Stage>> stages(const Model& model, const std::string& pipeline,
                                      const Shape& input) const override {
    const HunyuanVideoVaeConfig& c = hv(*model.config);
    if (pipeline == kDecode)
      return std::vector<Stage>{{build_hunyuan_video_decoder_graph(c), input, ""}};
    std::vector<Stage> stages{{build_hunyuan_video_encoder_graph(c), input, ""}};
    if (pipeline == kRoundtrip)
      stages.push_back({build_hunyuan_video_decoder_graph(c), {}, "mean"});
    return stages;
  }

  std::string check_tiling_decision(const ModelConfig& config, const TilingOptions& options,
                                    const TilingDecision& d) const override {
    auto t = hv_tiles(hv(config), options);
    if (!t.ok()) return t.error().message();
    const HvStage s = d.decode ? HvStage::kDecode : HvStage::kEncode;
    const bool time = t->in_time(s, d.input), space = t->in_space(s, d.input);
    const char* what = d.decode ? "decode" : "encode";
    auto verdict = [&](bool did, bool rule, const std::string& axis, const std::string& limit) {
      return "the compiled path " + std::string(did ? "tiled" : "did not tile") + " the " + what +
             " input " + shape_string(d.input) + " " + axis + ", but the config's rule (" + limit +
             ") says it " + (rule ? "must tile" : "fits one tile") + " (" + d.text() + ")";
    };
    if (d.framewise != time)
      return verdict(d.framewise, time, "in time",
                     "tile in time only above " +
                         (d.decode ? std::to_string(t->latent_min_frames()) + " latent frames"
                                   : std::to_string(t->min_frames) + " frames"));
    if (d.engaged != space)
      return verdict(d.engaged, space, "in space",
                     "tile only above the " +
                         (d.decode ? std::to_string(t->latent_min()) + " latent"
                                   : std::to_string(t->min_px) + " px") +
                         " tile min in height or width");
    return "";
  }

  Expected<SeamBands> seam_bands(const ModelConfig& config, const TilingOptions& options,
                                 const std::string& pipeline, const Shape& input) const override {
    TP_ASSIGN_OR_RETURN(HvTiles t, hv_tiles(hv(config), options));
    return hv_seam_bands(t, hv(config), pipeline != kDecode, pipeline != kEncode, input);
  }

  // Around the spatial thresholds of each stage the pipeline runs (res=tiling); the temporal ones
  // are frame counts, which case lines give with frames=.
  Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(
      const ModelConfig& config, const std::string& pipeline,
      const TilingOptions& options) const override {
    TilingOptions spatial = options;
    spatial.enabled = true;
    TP_ASSIGN_OR_RETURN(HvTiles t, hv_tiles(hv(config), spatial));
    std::vector<std::pair<int64_t, int64_t>> thresholds;
    if (pipeline != kDecode) thresholds.emplace_back(t.min_px, t.stride_px);
    if (pipeline != kEncode)
      thresholds.emplace_back(t.latent_min() * t.ratio, t.latent_stride() * t.ratio);
    return points_around_thresholds(thresholds, t.ratio);
  }

  // A tile's pixels over the frame's (one tile at a time), and how many tiles cover a pixel.
  double tile_share(const ModelConfig& config, const TilingOptions& options, int64_t height,
                    int64_t width) const override {
    auto t = hv_tiles(hv(config), options);
    if (!t.ok() || !options.enabled) return 1;
    return std::min(1.0, double(t->min_px) * double(t->min_px) / (double(height) * double(width)));
  }
  double tile_coverage(const ModelConfig& config, const TilingOptions& options, int64_t height,
                       int64_t width) const override {
    auto t = hv_tiles(hv(config), options);
    if (!t.ok() || !options.enabled) return 1;
    auto per_axis = [&](int64_t px) {
      const int64_t over = (t->min_px + t->stride_px - 1) / t->stride_px;
      return double(std::max<int64_t>(1, std::min(over, (px + t->stride_px - 1) / t->stride_px)));
    };
    return per_axis(height) * per_axis(width);
  }

 private:
  // Whether diffusers' rule tiles any stage of `pipeline` on `x` (in space or in time).
  static bool tiles_any(const HvTiles& t, const HunyuanVideoVaeConfig& c,
                        const std::string& pipeline, const Shape& x) {
    auto stage = [&](HvStage s, const Shape& in) { return t.in_time(s, in) || t.in_space(s, in); };
    if (pipeline == kDecode) return stage(HvStage::kDecode, x);
    const int64_t r = c.spatial_compression_ratio;
    const Shape z{x[0], c.latent_channels, c.latent_frames(x[2]), x[3] / r, x[4] / r};
    return stage(HvStage::kEncode, x) || (pipeline == kRoundtrip && stage(HvStage::kDecode, z));
  }
};

}  // namespace

const Family& HunyuanVideoVaeConfig::family() const {
  return autoencoder_kl_hunyuan_video_family();
}

const Family& autoencoder_kl_hunyuan_video_family() {
  static const HunyuanVideoVaeFamily family;
  return family;
}

}  // namespace tp
