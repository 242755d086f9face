#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/cli/paths.h"
#include "harness/core/memory.h"
#include "harness/core/tensor_io.h"

namespace tp {

Status exec_command(const ExecOptions& o) {
  const std::string& pipeline = o.pipeline;
  if (!is_pipeline_name(pipeline))
    return Error("unknown pipeline '" + pipeline + "'; twinpath runs:\n" + pipelines_help());
  const CompiledOptions defaults;
  if (!is_compiled_path(o.path) &&
      (o.compiled.policy != defaults.policy || !o.compiled.keep_fp32.empty() ||
       !o.compiled.cast_skip.empty() || !o.compiled.load.empty() || !o.compiled.fuse_qkv.empty() ||
       !o.compiled.inject.empty() || o.compiled.shape_policy != defaults.shape_policy ||
       !o.compiled.load_plan.empty() || !o.compiled.save_plan.empty() || o.compiled.validate_plans))
    return Error(
        "--policy, --keep-fp32, --cast-skip, --load, --fuse-qkv, --inject, --shape-policy, "
        "--save-plan, --load-plan and --validate-plan apply to the compiled path; use --path "
        "compiled:cpu, or "
        "drop them");
  if (o.tiling != "on" && o.tiling != "off")
    return Error("--tiling " + o.tiling + " is unknown; use --tiling on or --tiling off");
  if (o.repeat < 1 || o.repeat > 1000)
    return Error("--repeat " + std::to_string(o.repeat) +
                 " is not a number of calls; give 1 (the default) to 1000");
  if (o.tiling == "off" && (o.tile_min != 0 || o.tile_stride != 0))
    return Error("--tile-min and --tile-stride need --tiling on");
  if (o.tile_min < 0 || o.tile_stride < 0)
    return Error("--tile-min and --tile-stride are sizes in pixels and must be positive");
  if (o.framewise != "on" && o.framewise != "off")
    return Error("--framewise " + o.framewise + " is unknown; use --framewise on or off");
  if (o.framewise == "off" && (o.tile_min_frames != 0 || o.tile_stride_frames != 0))
    return Error(
        "--tile-min-frames and --tile-stride-frames size the tiling in time that "
        "--framewise off turns off; drop one or the other");
  if (o.tile_min_frames < 0 || o.tile_stride_frames < 0)
    return Error(
        "--tile-min-frames and --tile-stride-frames are frame counts and must be positive");
  PipelineOptions options;
  options.tiling = TilingOptions{o.tiling == "on",    o.tile_min,        o.tile_stride,
                                 o.framewise == "on", o.tile_min_frames, o.tile_stride_frames};
  TP_ASSIGN_OR_RETURN(options.values, family_flag_values(o.family, pipeline));
  TP_RETURN_IF_ERROR(check_required_models(pipeline, options.values));
  // The other models the pipeline reads (a text-to-image pipeline's VAE, the refiner).
  std::vector<std::unique_ptr<Model>> others;
  for (const OtherModel& other : find_pipeline(pipeline)->models) {
    const std::string dir = given_option(options.values, other.option);
    if (dir.empty()) continue;
    auto loaded = load_model(dir);
    if (!loaded.ok())
      return Error("--" + pipeline_option_flag(other.option) + " " + dir + ": " +
                   loaded.error().message());
    others.push_back(std::make_unique<Model>(std::move(loaded).value()));
    options.models.emplace_back(other.option, others.back().get());
  }
  const TilingOptions& tiling = options.tiling;
  TP_ASSIGN_OR_RETURN(PathChoice path, make_path(o.path, o.compiled, options));
  TP_ASSIGN_OR_RETURN(Model model, load_model(o.model_dir));
  TP_RETURN_IF_ERROR(check_family_runs(model, pipeline));
  if (tiling.enabled && !model.family().pipeline(pipeline)->tiles)
    return Error("--tiling on: " + model.family().class_name() + " does not tile " + pipeline);
  if ((o.framewise == "off" || o.tile_min_frames || o.tile_stride_frames) &&
      !model.family().pipeline(pipeline)->tiles_in_time)
    return Error(
        "--framewise, --tile-min-frames and --tile-stride-frames: " + model.family().class_name() +
        " does not tile " + pipeline + " in time; leave them out");
  // Refuse an output the results cannot be written to before spending time on the run.
  TP_RETURN_IF_ERROR(
      check_output_path(o.output, model.family().pipeline(pipeline)->outputs.size()));
  if (path.consume) {  // nothing else reads the checkpoints: the path keeps what it prepares
    path.consume(model.weights);
    for (auto& other : others) path.consume(other->weights);
  }
  TP_ASSIGN_OR_RETURN(NamedTensors file, read_tensor_file(o.input));
  TP_ASSIGN_OR_RETURN(NamedTensors inputs, model.family().select_inputs(pipeline, file, o.input));
  NamedTensors outputs;
  std::vector<double> seconds;  // per call
  for (int64_t call = 0; call < o.repeat; ++call) {
    const auto start = std::chrono::steady_clock::now();
    TP_ASSIGN_OR_RETURN(outputs, path.run(model, pipeline, inputs));
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  TP_RETURN_IF_ERROR(write_tensor_file(o.output, outputs));

  std::cout << pipeline << " on " << path.description << ", " << model.family().class_name()
            << " from " << o.model_dir << "\n";
  for (const auto& [name, t] : inputs)  // a single input prints as "input", several by name
    std::cout << "  " << (inputs.size() == 1 ? std::string("input ") : "input " + name) << " "
              << shape_string(t.shape()) << " " << dtype_name(t.dtype()) << "\n";
  for (const auto& [name, t] : outputs)
    std::cout << "  " << name << (name.size() < 6 ? std::string(6 - name.size(), ' ') : "") << " "
              << shape_string(t.shape()) << " " << dtype_name(t.dtype()) << "\n";
  if (path.details) std::cout << path.details();
  char line[128];
  std::snprintf(line, sizeof line, "  time   %.3f s\n", seconds[0]);
  std::cout << line;
  if (seconds.size() > 1) {
    std::snprintf(line, sizeof line, "  warm   %.3f s (best of calls 2-%zu)\n",
                  *std::min_element(seconds.begin() + 1, seconds.end()), seconds.size());
    std::cout << line;
  }
  if (const int64_t peak = peak_rss_bytes(); peak > 0) {
    std::snprintf(line, sizeof line, "  memory %.2f GiB peak resident\n", double(peak) / (1 << 30));
    std::cout << line;
  }
  std::cout << "wrote " << o.output << "\n";
  return Status();
}

}  // namespace tp
