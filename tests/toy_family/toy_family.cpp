#include "tests/toy_family/toy_family.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/core/rng.h"

namespace tp::testing {
namespace {

struct ToyConfig : ModelConfig {
  int channels = 3;
  int hidden = 8;
  int groups = 4;
  const Family& family() const override { return toy_family(); }
};

const ToyConfig& toy(const ModelConfig& c) { return dynamic_cast<const ToyConfig&>(c); }

Graph toy_graph(const ToyConfig& c) {
  GraphBuilder b("toy.net");
  int x = b.input("sample");
  int h = b.conv2d_same("conv_in", x, c.channels, c.hidden, 3);
  int r = b.group_norm("block.norm", h, c.hidden, c.groups, 1e-6);
  r = b.unary("block.act", OpKind::kSilu, r);
  r = b.conv2d_same("block.conv", r, c.hidden, c.hidden, 3);
  h = b.add("block.add", h, r);
  b.module("block", h);
  h = b.conv2d_same("conv_out", h, c.hidden, c.channels, 3);
  b.output("sample", h);
  return b.finish();
}

// toy.tokens: the image as tokens [1, H*W, C] through one transformer block of the N-d ops
// (projection, LayerNorm, 2-head self-attention with a residual, GELU, projection back).
Graph toy_transformer_graph(const ToyConfig& c) {
  GraphBuilder b("toy.transformer");
  const int x = b.input("sample");
  int h = b.permute("tokens", b.reshape("tokens.flatten", x, {0, c.channels, -1}), {0, 2, 1});
  h = b.linear_last("proj_in", h, c.channels, c.hidden);
  const int n = b.layer_norm("norm1", h, {c.hidden}, 1e-5, true);
  const int q = b.linear_last("attn1.to_q", n, c.hidden, c.hidden, false),
            k = b.linear_last("attn1.to_k", n, c.hidden, c.hidden, false),
            v = b.linear_last("attn1.to_v", n, c.hidden, c.hidden, false);
  const int a = b.multi_head_attention("attn1", q, k, v, 2, 1.0 / std::sqrt(c.hidden / 2.0));
  h = b.binary("attn1.residual", BinaryOp::kAdd, h, a);
  b.module("block", h);
  h = b.gelu("ff.act", h, false);
  h = b.linear_last("proj_out", h, c.hidden, c.channels);
  b.output("tokens", h);
  return b.finish();
}

Graph graph_of(const ToyConfig& c, const std::string& pipeline) {
  return pipeline == "toy.tokens" ? toy_transformer_graph(c) : toy_graph(c);
}

class ToyFamily : public Family {
 public:
  std::string class_name() const override { return "ToyConvNet"; }
  Expected<std::shared_ptr<const ModelConfig>> parse_config(
      const nlohmann::json& j, const std::string& source) const override {
    auto c = std::make_shared<ToyConfig>();
    try {
      c->channels = j.value("channels", c->channels);
      c->hidden = j.value("hidden", c->hidden);
      c->groups = j.value("groups", c->groups);
    } catch (const nlohmann::json::exception&) {
      return Error(source + ": channels, hidden and groups must be integers");
    }
    if (c->channels < 1 || c->hidden < 1 || c->groups < 1 || c->hidden % c->groups)
      return Error(source + ": hidden must be a positive multiple of groups");
    return std::shared_ptr<const ModelConfig>(c);
  }
  std::vector<std::string> builtin_names() const override { return {"tiny-toy"}; }
  std::string builtin_text(const std::string&) const override {
    return R"({"_class_name": "ToyConvNet", "channels": 3, "hidden": 8, "groups": 4})";
  }
  std::vector<Graph> graphs(const ModelConfig& c) const override {
    return {toy_graph(toy(c)), toy_transformer_graph(toy(c))};
  }
  std::vector<std::pair<std::string, std::string>> pipelines() const override {
    return {{"toy.forward", "image -> ToyConvNet -> image (a test's toy family)"},
            {"toy.tokens", "image as tokens -> one transformer block -> tokens (N-d ops)"}};
  }
  Expected<Shape> input_shape(const ModelConfig& c, const std::string&, int64_t height,
                              int64_t width) const override {
    return Shape{1, toy(c).channels, height, width};
  }
  int64_t input_scale(const ModelConfig&, const std::string&) const override { return 1; }
  Expected<Tensor> select_input(const std::string&, const NamedTensors& tensors,
                                const std::string& source) const override {
    if (tensors.size() != 1) return Error(source + ": toy.forward takes a file of one tensor");
    return tensors[0].second;
  }
  Status check_input(const Model& m, const std::string&, const Tensor& input) const override {
    if (input.rank() != 4 || input.dim(1) != toy(*m.config).channels)
      return Error("toy.forward takes [batch, " + std::to_string(toy(*m.config).channels) +
                   ", height, width], not " + shape_string(input.shape()));
    return Status();
  }
  Expected<Tensor> generate_input(const Model& m, const InputRequest& r,
                                  const GraphRunner&) const override {
    TP_ASSIGN_OR_RETURN(Shape shape, input_shape(*m.config, r.pipeline, r.height, r.width));
    Tensor t(DType::kF32, shape);
    Rng rng(r.seed, "input");
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = float(r.sigma * rng.uniform(-1, 1));
    return t;
  }
  Expected<NamedTensors> run(const Model& m, const std::string& pipeline,
                             const NamedTensors& inputs, GraphExecutor& executor,
                             const PipelineOptions&) const override {
    TP_ASSIGN_OR_RETURN(Tensor input, select_input(pipeline, inputs, pipeline + "'s inputs"));
    TP_RETURN_IF_ERROR(check_input(m, pipeline, input));
    return executor.run(graph_of(toy(*m.config), pipeline), m.weights, {{"sample", input}});
  }
  Expected<std::vector<Stage>> stages(const Model& m, const std::string& pipeline,
                                      const Shape& input) const override {
    return std::vector<Stage>{{graph_of(toy(*m.config), pipeline), input, ""}};
  }
  bool image_output(const std::string& pipeline) const override {
    return pipeline == "toy.forward";
  }
};

}  // namespace

const Family& toy_family() {
  static const ToyFamily family;
  return family;
}

}  // namespace tp::testing
