#include "tests/toy_family/toy_family.h"

#include <algorithm>
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

// toy.forward's tiling: square tiles of kTile pixels side by side, no overlap, each run alone;
// it engages when the image is larger than one tile. Three 3x3 convs see kSeam pixels across a
// tile border, so those rows and columns are the seams.
constexpr int64_t kTile = 16, kSeam = 3;

bool engages(const Shape& input) { return input[2] > kTile || input[3] > kTile; }

// Rows [y0, y0 + h) and columns [x0, x0 + w) of a [1, C, H, W] tensor.
Tensor crop(const Tensor& t, int64_t y0, int64_t x0, int64_t h, int64_t w) {
  Tensor out(DType::kF32, {1, t.dim(1), h, w});
  for (int64_t c = 0; c < t.dim(1); ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        out.data<float>()[(c * h + y) * w + x] =
            t.data<float>()[(c * t.dim(2) + y0 + y) * t.dim(3) + x0 + x];
  return out;
}

void paste(Tensor& into, const Tensor& tile, int64_t y0, int64_t x0) {
  const int64_t h = tile.dim(2), w = tile.dim(3);
  for (int64_t c = 0; c < tile.dim(1); ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        into.data<float>()[(c * into.dim(2) + y0 + y) * into.dim(3) + x0 + x] =
            tile.data<float>()[(c * h + y) * w + x];
}

// The graph on each tile of `input`, the decision recorded on the executor.
Expected<NamedTensors> run_tiled(const Graph& graph, const Weights& weights, const Tensor& input,
                                 GraphExecutor& executor) {
  TilingDecision d;
  d.input = input.shape();
  d.engaged = engages(input.shape());
  d.rows = (input.dim(2) + kTile - 1) / kTile;
  d.cols = (input.dim(3) + kTile - 1) / kTile;
  d.tile = d.stride = d.threshold = kTile;
  executor.record_tiling(d);
  if (!d.engaged) return executor.run(graph, weights, {{"sample", input}});
  const Tensor x = input.to(DType::kF32);
  Tensor out(DType::kF32, x.shape());
  for (int64_t y = 0; y < x.dim(2); y += kTile)
    for (int64_t c = 0; c < x.dim(3); c += kTile) {
      const Tensor tile =
          crop(x, y, c, std::min(kTile, x.dim(2) - y), std::min(kTile, x.dim(3) - c));
      TP_ASSIGN_OR_RETURN(NamedTensors r, executor.run(graph, weights, {{"sample", tile}}));
      paste(out, r.front().second.to(DType::kF32), y, c);
    }
  return NamedTensors{{"sample", out}};
}

// Rows (or columns) within kSeam of an inner tile border.
std::vector<bool> seam_lines(int64_t size) {
  std::vector<bool> lines(std::size_t(size), false);
  for (int64_t border = kTile; border < size; border += kTile)
    for (int64_t i = std::max<int64_t>(0, border - kSeam); i < std::min(size, border + kSeam); ++i)
      lines[std::size_t(i)] = true;
  return lines;
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
  // toy.forward takes an option of its own (gain=) and tiles; toy.tokens does neither.
  const std::vector<PipelineDescriptor>& pipelines() const override {
    static const std::vector<PipelineDescriptor> kPipelines = [] {
      PipelineDescriptor forward =
          describe_pipeline("toy.forward", "image -> ToyConvNet -> image (a test's toy family)",
                            {"sample"}, {"sample"}, Produces::kImage);
      forward.options = {"gain"};
      forward.tiles = true;
      return std::vector<PipelineDescriptor>{
          forward, describe_pipeline("toy.tokens",
                                     "image as tokens -> one transformer block -> tokens (N-d ops)",
                                     {"sample"}, {"tokens"}, Produces::kLatents)};
    }();
    return kPipelines;
  }
  const std::vector<PipelineOption>& options() const override {
    static const std::vector<PipelineOption> kOptions = {
        {"gain", "toy-gain", "gain=G", "1", "the input is multiplied by G before the network",
         [](std::string_view v) -> Expected<std::string> {
           if (v != "1" && v != "2" && v != "4") return Error("expected gain=1, gain=2 or gain=4");
           return std::string(v);
         }}};
    return kOptions;
  }
  std::string check_tiling_decision(const ModelConfig&, const TilingOptions&,
                                    const TilingDecision& d) const override {
    if (d.engaged == engages(d.input)) return "";
    return std::string("toy.forward ") + (d.engaged ? "tiled" : "did not tile") + " " +
           shape_string(d.input) + " against its rule (tile above " + std::to_string(kTile) +
           " px)";
  }
  Expected<SeamBands> seam_bands(const ModelConfig&, const TilingOptions&, const std::string&,
                                 const Shape& input) const override {
    if (!engages(input))
      return SeamBands{
          std::vector<bool>(std::size_t(input[2])), std::vector<bool>(std::size_t(input[3])), {}};
    return SeamBands{seam_lines(input[2]), seam_lines(input[3]), {}};
  }
  Expected<std::vector<std::pair<int64_t, int64_t>>> tiling_points(
      const ModelConfig&, const std::string&, const TilingOptions&) const override {
    std::vector<std::pair<int64_t, int64_t>> points;
    for (int64_t size : {kTile - 4, kTile, kTile + 4, 2 * kTile + 4}) {
      points.emplace_back(size, kTile);
      if (size != kTile) points.emplace_back(kTile, size);
    }
    return points;
  }
  double tile_share(const ModelConfig&, const TilingOptions&, int64_t height,
                    int64_t width) const override {
    return std::min(1.0, double(kTile * kTile) / (double(height) * double(width)));
  }
  Expected<Shape> input_shape(const ModelConfig& c, const std::string&, int64_t height,
                              int64_t width, const OptionValues&) const override {
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
    TP_ASSIGN_OR_RETURN(Shape shape,
                        input_shape(*m.config, r.pipeline, r.height, r.width, r.options));
    Tensor t(DType::kF32, shape);
    Rng rng(r.seed, "input");
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = float(r.sigma * rng.uniform(-1, 1));
    return t;
  }
  Expected<NamedTensors> run(const Model& m, const std::string& pipeline,
                             const NamedTensors& inputs, GraphExecutor& executor,
                             const PipelineOptions& options) const override {
    TP_ASSIGN_OR_RETURN(Tensor input, select_input(pipeline, inputs, pipeline + "'s inputs"));
    TP_RETURN_IF_ERROR(check_input(m, pipeline, input));
    const Graph graph = graph_of(toy(*m.config), pipeline);
    if (const double gain = option_number(*this, options, "gain"); gain != 1) {
      input = input.to(DType::kF32);
      for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] *= float(gain);
    }
    if (options.tiling.enabled) return run_tiled(graph, m.weights, input, executor);
    return executor.run(graph, m.weights, {{"sample", input}});
  }
  Expected<std::vector<Stage>> stages(const Model& m, const std::string& pipeline,
                                      const Shape& input) const override {
    return std::vector<Stage>{{graph_of(toy(*m.config), pipeline), input, ""}};
  }
};

}  // namespace

const Family& toy_family() {
  static const ToyFamily family;
  return family;
}

}  // namespace tp::testing
