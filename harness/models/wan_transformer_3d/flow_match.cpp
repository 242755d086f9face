#include "harness/models/wan_transformer_3d/flow_match.h"

#include "harness/models/option_parsers.h"

namespace tp {
namespace {

constexpr int kTrain = 1000;
// The part the unconditional transformer calls run under (GraphExecutor::set_part).
constexpr const char* kUncondPart = "uncond/";

Tensor scalar(float v) {
  Tensor t(DType::kF32, {1});
  t.data<float>()[0] = v;
  return t;
}

Expected<Tensor> named(const NamedTensors& inputs, const std::string& name,
                       const std::string& pipeline, const std::string& why) {
  if (const Tensor* t = find_tensor(inputs, name)) return *t;
  return Error(pipeline + " reads '" + name + "' (" + why + "), which the inputs do not hold");
}

// A text input [B, L, text_dim] in float32 (the pipeline casts it to the transformer's dtype,
// which the executor does).
Expected<Tensor> text(const WanConfig& c, const NamedTensors& inputs, const std::string& name,
                      const std::string& why, int64_t batch) {
  TP_ASSIGN_OR_RETURN(Tensor t, named(inputs, name, "wan.denoise", why));
  if (t.rank() != 3 || t.dim(0) != batch || t.dim(2) != c.text_dim || t.dim(1) < 1)
    return Error("wan.denoise takes " + name + " of shape [" + std::to_string(batch) +
                 ", tokens, " + std::to_string(c.text_dim) + "], not " + shape_string(t.shape()));
  return t.to(t.dtype() == DType::kF64 ? DType::kF64 : DType::kF32);
}

const Tensor& only(const NamedTensors& outputs) { return outputs.front().second; }

}  // namespace

FlowSchedule flow_match_schedule(int steps, double shift) {
  // __init__: float32 timesteps 1000..1, sigmas t / 1000 shifted in float32; their ends.
  auto shifted32 = [&](float s) { return float(shift) * s / (1.0f + float(shift - 1) * s); };
  const double sigma_max = shifted32(float(kTrain) / float(kTrain));
  const double sigma_min = shifted32(1.0f / float(kTrain));
  // set_timesteps: numpy's float64 linspace(sigma_max * 1000, sigma_min * 1000, steps) (i * step
  // + start, the last exactly the stop), / 1000, shifted in float64, then float32.
  const double start = sigma_max * kTrain, stop = sigma_min * kTrain;
  const double step = steps > 1 ? (stop - start) / double(steps - 1) : 0;
  FlowSchedule s;
  for (int i = 0; i < steps; ++i) {
    const double t = i == steps - 1 && steps > 1 ? stop : double(i) * step + start;
    const double sigma = t / kTrain;
    s.sigmas.push_back(float(shift * sigma / (1 + (shift - 1) * sigma)));
    s.timesteps.push_back(s.sigmas.back() * float(kTrain));
  }
  s.sigmas.push_back(0.0f);
  return s;
}

Graph build_flow_guidance_graph() {
  GraphBuilder b("flow.guidance");
  const int cond = b.input("noise_pred"), uncond = b.input("noise_uncond");
  const int g = b.input("guidance_scale");
  const int diff = b.binary("guidance.diff", BinaryOp::kSub, cond, uncond);
  b.output("noise_pred", b.binary("guidance", BinaryOp::kAdd, uncond,
                                  b.binary("guidance.scaled", BinaryOp::kMul, g, diff)));
  return b.finish();
}

Graph build_flow_step_graph() {
  GraphBuilder b("flow.step");
  const int x = b.input("latents"), v = b.input("noise_pred"), dt = b.input("dt");
  b.output("latents", b.binary("prev_sample", BinaryOp::kAdd, x,
                               b.binary("dt_model_output", BinaryOp::kMul, dt, v)));
  Graph g = b.finish();
  g.fp32_arithmetic = true;
  return g;
}

const std::vector<PipelineOption>& wan_options() {
  static const std::vector<PipelineOption> kOptions = {
      steps_option(50),
      guidance_option(5),
      {"shift", "flow-shift", "shift=S", "3",
       "the flow-matching schedule's shift (FlowMatchEulerDiscreteScheduler(shift=S); Wan 2.1 "
       "uses 3 at 480p, 5 at 720p)",
       number_option([](double s) { return s > 0 && s <= 100; },
                     "expected shift=S, a number in (0, 100], e.g. shift=3")},
      {"frames", "frames", "frames=N", "3",
       "latent frames of a generated input (a video of 4(N-1)+1 frames through the VAE's 4x "
       "temporal downscale; 21 is Wan 2.1's 81-frame default)",
       whole_number_option("frames=N", 1, 1024)},
  };
  return kOptions;
}

Expected<NamedTensors> run_wan_denoise(const Model& model, const WanConfig& c,
                                       const NamedTensors& inputs, GraphExecutor& executor,
                                       const PipelineOptions& options) {
  const Family& family = model.family();
  const int steps = int(option_number(family, options, "steps"));
  const double guidance = option_number(family, options, "guidance");
  const bool guided = guidance > 1;
  TP_ASSIGN_OR_RETURN(Tensor latents, named(inputs, "latents", "wan.denoise", "the initial noise"));
  if (latents.rank() != 5 || latents.dim(1) != c.in_channels)
    return Error("wan.denoise takes latents [batch, " + std::to_string(c.in_channels) +
                 ", frames, height, width], not " + shape_string(latents.shape()));
  const int64_t batch = latents.dim(0);
  TP_ASSIGN_OR_RETURN(Tensor prompt,
                      text(c, inputs, "prompt_embeds", "the text conditioning", batch));
  Tensor negative;
  if (guided) {
    TP_ASSIGN_OR_RETURN(negative, text(c, inputs, "negative_prompt_embeds",
                                       "guidance > 1 needs the negative prompt", batch));
  }
  const FlowSchedule schedule = flow_match_schedule(steps, option_number(family, options, "shift"));
  const Graph transformer = build_wan_graph(c), step = build_flow_step_graph(),
              guide = build_flow_guidance_graph();
  Tensor x = latents.to(DType::kF32);  // prepare_latents: float32
  for (int i = 0; i < steps; ++i) {
    Tensor t(DType::kF32, {batch});
    std::fill(t.data<float>(), t.data<float>() + batch, schedule.timesteps[std::size_t(i)]);
    auto call = [&](const Tensor& context) {
      return executor.run(
          transformer, model.weights,
          {{"hidden_states", x}, {"timestep", t}, {"encoder_hidden_states", context}});
    };
    TP_ASSIGN_OR_RETURN(NamedTensors v, call(prompt));
    if (guided) {
      executor.set_part(kUncondPart);
      auto uncond_call = call(negative);
      executor.set_part("");
      TP_ASSIGN_OR_RETURN(NamedTensors uncond, std::move(uncond_call));
      TP_ASSIGN_OR_RETURN(v, executor.run(guide, model.weights,
                                          {{"noise_pred", only(v)},
                                           {"noise_uncond", only(uncond)},
                                           {"guidance_scale", scalar(float(guidance))}}));
    }
    const float dt = schedule.sigmas[std::size_t(i) + 1] - schedule.sigmas[std::size_t(i)];
    TP_ASSIGN_OR_RETURN(
        NamedTensors stepped,
        executor.run(step, model.weights,
                     {{"latents", x}, {"noise_pred", only(v)}, {"dt", scalar(dt)}}));
    x = only(stepped);
  }
  return NamedTensors{{"latents", x}};
}

}  // namespace tp
