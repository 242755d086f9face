// cuDNN's backend (graph) API, called directly: one operation graph of a single forward
// convolution per problem, engines from heuristics mode A, the first that finalizes under the
// numerics rules in cudnn_conv.h.
#include "compiled/kernels/cuda/cudnn_conv.h"

#include <cudnn_graph.h>

#include <array>
#include <optional>
#include <utility>
#include <vector>

// OPERATIONGRAPH_HANDLE and EXECUTION_PLAN_HANDLE are deprecated in cuDNN 9 in favour of a
// device-property descriptor, and still supported; they keep this file short.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace tp::compiled::cuda_impl {
namespace {

std::string cudnn_error(cudnnStatus_t s, const std::string& what) {
  return what + ": cuDNN error " + std::to_string(int(s)) + " (" + cudnnGetErrorString(s) + ")";
}

// An owned backend descriptor.
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptorType_t type) {
    if (cudnnBackendCreateDescriptor(type, &d_) != CUDNN_STATUS_SUCCESS) d_ = nullptr;
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* address() { return &d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Attribute setting that stops at the first failure and remembers where.
class Builder {
 public:
  template <typename T>
  Builder& set(const Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
               int64_t count, const T* values, const char* what) {
    if (status_ == CUDNN_STATUS_SUCCESS && !d.get()) {
      status_ = CUDNN_STATUS_ALLOC_FAILED;
      where_ = what;
    }
    if (status_ == CUDNN_STATUS_SUCCESS) {
      status_ = cudnnBackendSetAttribute(d.get(), name, type, count, values);
      if (status_ != CUDNN_STATUS_SUCCESS) where_ = what;
    }
    return *this;
  }
  Builder& finalize(const Desc& d, const char* what) {
    if (status_ == CUDNN_STATUS_SUCCESS) {
      status_ = cudnnBackendFinalize(d.get());
      if (status_ != CUDNN_STATUS_SUCCESS) where_ = what;
    }
    return *this;
  }
  bool ok() const { return status_ == CUDNN_STATUS_SUCCESS; }
  std::string error() const { return cudnn_error(status_, where_); }

 private:
  cudnnStatus_t status_ = CUDNN_STATUS_SUCCESS;
  std::string where_;
};

cudnnDataType_t data_type(DType d) {
  return d == DType::kBF16  ? CUDNN_DATA_BFLOAT16
         : d == DType::kF16 ? CUDNN_DATA_HALF
                            : CUDNN_DATA_FLOAT;
}

constexpr int64_t kX = 1, kW = 2, kY = 3, kAcc = 4;  // the tensors' unique ids

// A channels-last tensor: cuDNN's dimensions are always [N, C, H, W]; the strides say NHWC.
void tensor(Builder& b, const Desc& d, int64_t uid, cudnnDataType_t type, int64_t n, int64_t c,
            int64_t h, int64_t w, bool is_virtual = false) {
  const std::array<int64_t, 4> dims{n, c, h, w}, strides{h * w * c, 1, w * c, c};
  const int64_t alignment = kCudnnAlignment;
  b.set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual")
      .set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor data type")
      .set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "tensor dimensions")
      .set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "tensor strides")
      .set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id")
      .set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "tensor alignment")
      .finalize(d, "tensor");
}

bool allowed(const std::vector<cudnnBackendNumericalNote_t>& notes) {
  for (cudnnBackendNumericalNote_t n : notes) switch (n) {
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
      case CUDNN_NUMERICAL_NOTE_FFT:
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
        return false;
      default:
        break;
    }
  return true;
}

}  // namespace

struct CudnnConvs::Planned {
  Desc plan;
  std::vector<Desc> parts;  // the graph and engine configuration the plan was made from
  int64_t workspace = 0;
  int64_t engine = -1;  // cuDNN's global engine index
};

struct CudnnConvs::Impl {
  cudnnHandle_t handle = nullptr;
  // Per problem: its plan, or why there is none.
  std::map<ConvProblem, std::pair<std::optional<Planned>, std::string>> plans;

  // The plan, or the reasons there is none: the convolution alone first, then (for engines
  // that only take a convolution with an epilogue) the convolution into a virtual fp32 tensor
  // and an fp32 identity into y, which computes the same values.
  std::pair<std::optional<Planned>, std::string> build(const ConvProblem& p) const {
    auto [alone, why] = build_graph(p, false);
    if (alone) return {std::move(alone), ""};
    auto [with_identity, why_identity] = build_graph(p, true);
    if (with_identity) return {std::move(with_identity), ""};
    return {std::nullopt, "alone: " + why + "; with an identity epilogue: " + why_identity};
  }

  std::pair<std::optional<Planned>, std::string> build_graph(const ConvProblem& p,
                                                             bool identity) const {
    Builder b;
    const cudnnDataType_t io = data_type(p.operand), f32 = CUDNN_DATA_FLOAT;
    Desc x(CUDNN_BACKEND_TENSOR_DESCRIPTOR), w(CUDNN_BACKEND_TENSOR_DESCRIPTOR),
        y(CUDNN_BACKEND_TENSOR_DESCRIPTOR), acc(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    tensor(b, x, kX, io, p.n, p.c, p.h, p.w);
    tensor(b, w, kW, io, p.k, p.c, p.r, p.s);
    tensor(b, y, kY, f32, p.n, p.k, p.ho, p.wo);
    if (identity) tensor(b, acc, kAcc, f32, p.n, p.k, p.ho, p.wo, true);
    Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t spatial = 2;
    const std::array<int64_t, 2> dilation{1, 1}, stride{p.stride, p.stride},
        pre{p.pad_top, p.pad_left}, post{p.pad_bottom, p.pad_right};
    b.set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "compute type")
        .set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "mode")
        .set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, "dims")
        .set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data(),
             "dilations")
        .set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data(),
             "strides")
        .set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre.data(), "padding")
        .set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post.data(),
             "padding")
        .finalize(conv, "convolution");
    Desc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    const float alpha = 1.0f, beta = 0.0f;
    const cudnnBackendDescriptor_t xd = x.get(), wd = w.get(), cd = conv.get(),
                                   yd = identity ? acc.get() : y.get();
    b.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xd,
          "x")
        .set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &wd,
             "w")
        .set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &yd,
             "y")
        .set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
             1, &cd, "convolution")
        .set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha,
             "alpha")
        .set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "beta")
        .finalize(op, "the forward convolution");
    Desc pointwise(CUDNN_BACKEND_POINTWISE_DESCRIPTOR),
        copy(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    if (identity) {
      const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_IDENTITY;
      const cudnnBackendDescriptor_t pd = pointwise.get(), ad = acc.get(), out = y.get();
      b.set(pointwise, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "identity")
          .set(pointwise, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32,
               "identity precision")
          .finalize(pointwise, "the identity")
          .set(copy, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &pd, "identity")
          .set(copy, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ad,
               "identity x")
          .set(copy, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out,
               "identity y")
          .finalize(copy, "the identity operation");
    }
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    const std::array<cudnnBackendDescriptor_t, 2> ops{op.get(), copy.get()};
    b.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, identity ? 2 : 1,
          ops.data(), "ops")
        .set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "handle")
        .finalize(graph, "the operation graph");
    if (!b.ok()) return {std::nullopt, b.error()};
    // Heuristics mode A's ranking first; then the fallback list, which holds engines mode A may
    // leave out.
    std::string why;
    for (const cudnnBackendHeurMode_t heur : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      why += std::string(why.empty() ? "" : "; ") +
             (heur == CUDNN_HEUR_MODE_A ? "heuristics A: " : "fallback: ");
      Builder hb;
      Desc heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      const cudnnBackendDescriptor_t gd = graph.get();
      hb.set(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
             &gd, "graph")
          .set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur, "mode")
          .finalize(heuristics, "the engine heuristics");
      if (!hb.ok()) {
        why += hb.error();
        continue;
      }
      int64_t count = 0;
      if (cudnnStatus_t s =
              cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
          s != CUDNN_STATUS_SUCCESS) {
        why += cudnn_error(s, "counting engine configurations");
        continue;
      }
      std::vector<Desc> configs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
        raw.push_back(configs.back().get());
      }
      if (cudnnStatus_t s =
              cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data());
          s != CUDNN_STATUS_SUCCESS) {
        why += cudnn_error(s, "reading engine configurations");
        continue;
      }
      std::string last = std::to_string(count) + " engine configurations, none allowed";
      for (int64_t i = 0; i < count; ++i) {
        Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        int64_t got = 0;
        cudnnBackendDescriptor_t ed = engine.get();
        if (cudnnBackendGetAttribute(raw[std::size_t(i)], CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                                     &ed) != CUDNN_STATUS_SUCCESS)
          continue;
        std::vector<cudnnBackendNumericalNote_t> notes(CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
        int64_t n_notes = 0;
        if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                     CUDNN_TYPE_NUMERICAL_NOTE, int64_t(notes.size()), &n_notes,
                                     notes.data()) != CUDNN_STATUS_SUCCESS)
          continue;
        notes.resize(std::size_t(n_notes));
        if (!allowed(notes)) continue;
        Planned planned;
        planned.plan = Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        Builder pb;
        const cudnnBackendDescriptor_t cfg = raw[std::size_t(i)];
        pb.set(planned.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
               "handle")
            .set(planned.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg, "engine configuration")
            .finalize(planned.plan, "the execution plan");
        if (!pb.ok()) {
          last = pb.error();
          continue;
        }
        if (cudnnBackendGetAttribute(planned.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &got,
                                     &planned.workspace) != CUDNN_STATUS_SUCCESS)
          continue;
        cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                 &got, &planned.engine);
        for (Desc* d : {&x, &w, &y, &acc, &conv, &op, &pointwise, &copy, &graph, &heuristics})
          planned.parts.push_back(std::move(*d));
        for (Desc& c : configs) planned.parts.push_back(std::move(c));
        planned.parts.push_back(std::move(engine));
        return {std::move(planned), ""};
      }
      why += last;
    }
    return {std::nullopt, why};
  }
};

Expected<std::unique_ptr<CudnnConvs>> CudnnConvs::create(cudaStream_t stream) {
  std::unique_ptr<CudnnConvs> c(new CudnnConvs);
  c->impl_ = std::make_unique<Impl>();
  if (cudnnStatus_t s = cudnnCreate(&c->impl_->handle); s != CUDNN_STATUS_SUCCESS) {
    c->impl_->handle = nullptr;
    return Error(cudnn_error(s, "starting cuDNN") +
                 "; install cuDNN 9 beside the CUDA toolkit, or set TWINPATH_CUDA_KERNELS=per-op");
  }
  if (cudnnStatus_t s = cudnnSetStream(c->impl_->handle, stream); s != CUDNN_STATUS_SUCCESS)
    return Error(cudnn_error(s, "binding cuDNN to the stream"));
  return c;
}

CudnnConvs::~CudnnConvs() {
  if (!impl_) return;
  impl_->plans.clear();  // plans before the handle they were made with
  if (impl_->handle) cudnnDestroy(impl_->handle);
}

const CudnnConvs::Planned* CudnnConvs::plan(const ConvProblem& p) {
  auto it = impl_->plans.find(p);
  if (it == impl_->plans.end()) it = impl_->plans.emplace(p, impl_->build(p)).first;
  const std::optional<Planned>& planned = it->second.first;
  return planned ? &*planned : nullptr;
}

int64_t CudnnConvs::workspace_bytes(const Planned& plan) { return plan.workspace; }

Status CudnnConvs::run(const Planned& plan, const void* x, const void* w, float* y,
                       void* workspace) {
  const std::array<int64_t, 3> uids{kX, kW, kY};
  std::array<void*, 3> pointers{const_cast<void*>(x), const_cast<void*>(w), y};
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  Builder b;
  b.set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data(), "tensor ids")
      .set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers.data(),
           "pointers")
      .set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "workspace")
      .finalize(pack, "the variant pack");
  if (!b.ok()) return Error(b.error());
  if (cudnnStatus_t s = cudnnBackendExecute(impl_->handle, plan.plan.get(), pack.get());
      s != CUDNN_STATUS_SUCCESS)
    return Error(cudnn_error(s, "running a cuDNN convolution") +
                 "; TWINPATH_CUDA_KERNELS=per-op runs the convs without cuDNN");
  return Status();
}

std::string CudnnConvs::summary() const {
  std::map<int64_t, int> engines;
  std::string refused;
  int planned = 0;
  for (const auto& [p, entry] : impl_->plans) {
    if (entry.first) {
      ++planned;
      ++engines[entry.first->engine];
    } else {
      refused += "; " + p.describe() + " per-op: " + entry.second;
    }
  }
  std::string s = "cuDNN " + std::to_string(cudnnGetVersion()) + ": " + std::to_string(planned) +
                  " conv shapes on engines";
  for (const auto& [e, n] : engines) s += " " + std::to_string(e) + " (x" + std::to_string(n) + ")";
  return s + refused;
}

}  // namespace tp::compiled::cuda_impl
