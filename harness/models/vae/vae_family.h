// What AutoencoderKL and AutoencoderTiny share as families: the pipelines vae.encode,
// vae.decode and vae.roundtrip, their inputs, and tiling. Each family's folder makes one with its
// built-in configs.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "harness/models/family.h"
#include "harness/models/vae/vae_config.h"

namespace tp {

// What one VAE class tells the shared family code (its folder fills one in).
struct VaeArchitecture {
  std::string class_name;  // diffusers' _class_name
  // Whether a config.json without _class_name is this class's (by the fields it has).
  std::function<bool(const nlohmann::json&)> claims_unnamed;
  // A config.json object (parse_config checks that) to its config; `source` names the file.
  std::function<Expected<std::shared_ptr<VaeConfig>>(const nlohmann::json&, const std::string&)>
      parse;
  // The encoder's outputs by diffusers' names; the first is what the decoder reads.
  std::vector<std::string> encoder_outputs;
  // The space of valid configs random draws come from (its folder's config_space.cpp), or null.
  const ConfigSpace* config_space = nullptr;
};

class VaeFamily : public Family {
 public:
  VaeFamily(VaeArchitecture architecture,
            std::vector<std::pair<std::string, std::string>> builtins);

  std::string class_name() const override;
  bool claims(const nlohmann::json& config) const override;
  Expected<std::shared_ptr<const ModelConfig>> parse_config(
      const nlohmann::json& config, const std::string& source) const override;
  std::vector<std::string> builtin_names() const override;
  const ConfigSpace* config_space() const override { return arch_.config_space; }
  std::string builtin_text(const std::string& name) const override;
  std::vector<Graph> graphs(const ModelConfig& config) const override;
  std::vector<ParamSpec> param_specs(const ModelConfig& config) const override;
  const std::vector<PipelineDescriptor>& pipelines() const override { return pipelines_; }
  Expected<Shape> input_shape(const ModelConfig& config, const std::string& pipeline,
                              int64_t height, int64_t width, const OptionValues&) const override;
  int64_t input_scale(const ModelConfig& config, const std::string& pipeline) const override;
  Expected<Tensor> select_input(const std::string& pipeline, const NamedTensors& tensors,
                                const std::string& source) const override;
  Status check_input(const Model& model, const std::string& pipeline,
                     const Tensor& input) const override;
  Expected<Tensor> generate_input(const Model& model, const InputRequest& request,
                                  const GraphRunner& reference) const override;
  Expected<NamedTensors> run(const Model& model, const std::string& pipeline,
                             const NamedTensors& inputs, GraphExecutor& executor,
                             const PipelineOptions& options) const override;
  Expected<std::vector<Stage>> stages(const Model& model, const std::string& pipeline,
                                      const Shape& input) const override;
  // Tiling (vae_tiling_rule.cpp): diffusers' rule for AutoencoderKL and AutoencoderTiny.
  std::string check_tiling_decision(const ModelConfig& config, const TilingOptions& options,
                                    const TilingDecision& decision) const override;
  Expected<SeamBands> seam_bands(const ModelConfig& config, const TilingOptions& options,
                                 const std::string& pipeline, const Shape& input) const override;
  Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(
      const ModelConfig& config, const std::string& pipeline,
      const TilingOptions& options) const override;
  double tile_share(const ModelConfig& config, const TilingOptions& options, int64_t height,
                    int64_t width) const override;
  double tile_coverage(const ModelConfig& config, const TilingOptions& options, int64_t height,
                       int64_t width) const override;

 private:
  VaeArchitecture arch_;
  std::vector<std::pair<std::string, std::string>> builtins_;  // name, config.json
  std::vector<PipelineDescriptor> pipelines_;
};

}  // namespace tp
