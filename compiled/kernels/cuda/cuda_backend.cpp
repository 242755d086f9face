// The CUDA backend: arenas in device memory, weights uploaded once per session (in fp32 and,
// where a GEMM can take them exactly, in the activation dtype), and a plan run group by group
// with the same op sequence as the emulation (compiled/executor.cpp): values inside a group are
// fp32 device buffers, GEMMs go through cuBLAS with fp32 accumulation (f16 only under
// acc=f16), and each group output is rounded once into its arena buffer. Every CUDA and cuBLAS
// call is checked; the stream is synchronized after each group so an error names its group.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "compiled/backend.h"
#include "compiled/device.h"
#include "compiled/kernels/cuda/kernels.h"
#include "harness/core/shapes.h"

namespace tp::compiled {
namespace {

using cuda::Dims;
using cuda::Src;
using cuda::Storage;

constexpr int64_t kWorkspaceBytes = int64_t(256)
                                    << 20;  // patches of a conv chunk; scores of an attention block

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status();
  cudaGetLastError();  // clear a sticky-free error so the next call is not blamed for it
  if (e == cudaErrorNoKernelImageForDevice)
    return Error(
        what + ": this build has no kernels for " + cuda_device_description(0) +
        "; rebuild with -DCMAKE_CUDA_ARCHITECTURES set to this GPU's (e.g. 90 for H100/H200)");
  if (e == cudaErrorMemoryAllocation)
    return Error(
        what +
        ": the GPU ran out of memory; use a smaller resolution or batch, or tiling (--tiling on)");
  return Error(what + ": CUDA error " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

Status blas_status(cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status();
  return Error(what + ": cuBLAS error " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) +
               ")");
}

#define TP_CUDA(call, what) TP_RETURN_IF_ERROR(cuda_status((call), (what)))
#define TP_BLAS(call, what) TP_RETURN_IF_ERROR(blas_status((call), (what)))

Expected<Storage> storage_of(DType dt) {
  switch (dt) {
    case DType::kF32:
      return Storage::kF32;
    case DType::kF16:
      return Storage::kF16;
    case DType::kBF16:
      return Storage::kBF16;
    default:
      return Error(std::string("activations in ") + dtype_name(dt) +
                   " have no CUDA kernels; use f32, f16 or bf16");
  }
}

DType dtype_of(Storage s) {
  return s == Storage::kF16 ? DType::kF16 : s == Storage::kBF16 ? DType::kBF16 : DType::kF32;
}

// Device memory from the stream-ordered pool, freed in stream order.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), stream_(o.stream_) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    reset();
    p_ = std::exchange(o.p_, nullptr);
    stream_ = o.stream_;
    return *this;
  }
  ~DeviceMemory() { reset(); }
  static Expected<DeviceMemory> allocate(int64_t bytes, cudaStream_t stream,
                                         const std::string& what) {
    DeviceMemory m;
    m.stream_ = stream;
    TP_CUDA(cudaMallocAsync(&m.p_, std::size_t(std::max<int64_t>(bytes, 1)), stream), what);
    return m;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }

 private:
  void reset() {
    if (p_) cudaFreeAsync(p_, stream_);
    p_ = nullptr;
  }
  void* p_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// A prepared parameter on the device: decoded values in fp32, and in f16/bf16 where a GEMM
// reads them in that dtype (only when exact: the stored dtype itself, or fp8 widened), plus
// the fp8 scales.
struct DeviceParam {
  std::shared_ptr<const PreparedParam> host;
  std::array<DeviceMemory, 3> values;  // by Storage
  DeviceMemory scales;
};

// The GEMM operand dtype for a conv reading `src` with weights stored as `w`: the activation
// dtype when both operands are exact in it (tensor cores, fp32 accumulation), else fp32.
Storage operand_for(Storage src, DType w) {
  if (src == Storage::kF16 && (w == DType::kF16 || dtype_is_fp8(w))) return Storage::kF16;
  if (src == Storage::kBF16 && (w == DType::kBF16 || dtype_is_fp8(w))) return Storage::kBF16;
  return Storage::kF32;
}

cudaDataType_t blas_type(Storage s) {
  return s == Storage::kF16 ? CUDA_R_16F : s == Storage::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

std::size_t storage_size(Storage s) { return s == Storage::kF32 ? 4 : 2; }

// A value's channels-last extents: [B, H, W, C] for [B, C, H, W]; other ranks of [B, C, *S] as
// [B, prod S, 1, C] (all GroupNorm's statistics need); ranks below 2 as one row.
Dims nhwc_dims(const Shape& s) {
  if (s.size() == 4) return Dims{s[0], s[2], s[3], s[1]};
  if (s.size() < 2) return Dims{1, 1, 1, shape_numel(s)};
  return Dims{s[0], shape_numel(s) / std::max<int64_t>(1, s[0] * s[1]), 1, s[1]};
}

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override {
    params_.clear();
    if (blas_) cublasDestroy(blas_);
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  Status init() {
    TP_CUDA(cudaSetDevice(0), "selecting CUDA device 0");
    TP_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a CUDA stream");
    TP_BLAS(cublasCreate(&blas_), "creating a cuBLAS handle");
    TP_BLAS(cublasSetStream(blas_, stream_), "binding cuBLAS to the stream");
    // Default math: f16/bf16 GEMMs on tensor cores with fp32 accumulation, fp32 GEMMs without TF32.
    TP_BLAS(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "setting cuBLAS math mode");
    cudaMemPool_t pool;
    TP_CUDA(cudaDeviceGetDefaultMemPool(&pool, 0), "reading the device memory pool");
    uint64_t keep = UINT64_MAX;  // keep freed scratch for the next group instead of returning it
    TP_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "configuring the memory pool");
    return Status();
  }

  std::string device() const override { return "cuda"; }
  std::string description() const override { return cuda_device_description(0); }
  int64_t available_bytes() const override {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    // Leave room for the fp32 values inside a group, the workspace and the weights.
    return std::max<int64_t>(0, int64_t(free) - (int64_t(1) << 30) - 4 * kWorkspaceBytes);
  }

  Expected<std::byte*> allocate(int64_t bytes) override {
    void* p = nullptr;
    TP_CUDA(cudaMalloc(&p, std::size_t(std::max<int64_t>(bytes, 1))),
            "allocating a " + std::to_string(bytes) + "-byte arena");
    TP_CUDA(cudaMemset(p, 0xFF, std::size_t(bytes)),
            "poisoning the arena");  // NaN in f32, f16 and bf16
    return static_cast<std::byte*>(p);
  }
  void release(std::byte* arena) override {
    if (!arena) return;
    cudaStreamSynchronize(stream_);
    cudaFree(arena);
  }

  Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs,
                 const GroupObserver& observe) override;
  Expected<std::vector<Tensor>> run_group(const Plan& plan, std::byte* arena, int index,
                                          const Shape& input_shape,
                                          const std::map<int, Tensor>& values) override;

  Expected<Tensor> read(const Plan& plan, const std::byte* arena, int value,
                        const Shape& shape) override {
    const Buffer& b = plan.buffers.at(value);
    std::vector<std::byte> host(std::size_t(shape_numel(shape)) * dtype_size(b.dtype));
    TP_CUDA(cudaMemcpyAsync(host.data(), arena + b.offset, host.size(), cudaMemcpyDeviceToHost,
                            stream_),
            "reading " + plan.graph->value_names[std::size_t(value)] + " back from the GPU");
    TP_CUDA(cudaStreamSynchronize(stream_), "reading a value back from the GPU");
    Tensor out = Tensor::uninitialized(b.dtype, shape);
    if (plan.row_major)
      std::memcpy(out.raw(), host.data(), host.size());
    else
      transpose_channels(host.data(), out.raw(), shape, dtype_size(b.dtype), false);
    return out;
  }

  // Device-side helpers the group runner uses.
  cudaStream_t stream() const { return stream_; }
  Expected<DeviceMemory> scratch(int64_t bytes, const std::string& what) {
    return DeviceMemory::allocate(bytes, stream_, what);
  }
  Expected<const DeviceParam*> param(const std::shared_ptr<const PreparedParam>& p,
                                     Storage operand);
  // Row-major out[m][n] = a[m][k] * b^T with b [n][k] (`b_transposed`), or a * b with b [k][n];
  // out's rows `ldc` apart (0: n).
  Status gemm(const void* a, const void* b, Storage operand, int64_t m, int64_t n, int64_t k,
              bool b_transposed, bool f16_accumulation, float* out, int64_t ldc = 0);

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::map<const PreparedParam*, DeviceParam> params_;
};

Expected<const DeviceParam*> CudaBackend::param(const std::shared_ptr<const PreparedParam>& p,
                                                Storage operand) {
  DeviceParam& d = params_[p.get()];
  d.host = p;
  DeviceMemory& slot = d.values[std::size_t(operand)];
  if (!slot.get()) {
    const std::string what = "uploading " + p->key + " to the GPU";
    Tensor values = Tensor::uninitialized(DType::kF32, {int64_t(p->values.size())});
    std::memcpy(values.raw(), p->values.data(), p->values.size() * sizeof(float));
    if (operand != Storage::kF32) values = values.to(dtype_of(operand));  // exact: see operand_for
    TP_ASSIGN_OR_RETURN(slot, scratch(int64_t(values.nbytes()), what));
    TP_CUDA(cudaMemcpy(slot.get(), values.raw(), values.nbytes(), cudaMemcpyHostToDevice), what);
  }
  if (!p->scales.empty() && !d.scales.get()) {
    const std::string what = "uploading " + p->key + "'s fp8 scales to the GPU";
    TP_ASSIGN_OR_RETURN(d.scales, scratch(int64_t(p->scales.size() * sizeof(float)), what));
    TP_CUDA(cudaMemcpy(d.scales.get(), p->scales.data(), p->scales.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            what);
  }
  return &d;
}

Status CudaBackend::gemm(const void* a, const void* b, Storage operand, int64_t m, int64_t n,
                         int64_t k, bool b_transposed, bool f16_accumulation, float* out,
                         int64_t ldc) {
  const cudaDataType_t t = blas_type(operand);
  if (ldc == 0) ldc = n;
  if (f16_accumulation && ldc != n) return Error("an f16-accumulation GEMM into strided rows");
  // cuBLAS is column-major: row-major C[m][n] is column-major C^T [n][m], so compute C^T = B' A^T.
  const cublasOperation_t op_b = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = int(b_transposed ? k : n);
  if (!f16_accumulation) {
    const float one = 1.0f, zero = 0.0f;
    TP_BLAS(cublasGemmEx(blas_, op_b, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, t, ldb, a, t,
                         int(k), &zero, out, CUDA_R_32F, int(ldc), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (fp32 accumulation)");
    return Status();
  }
  // acc=f16: cuBLAS's f16 compute type needs an f16 output, widened after.
  TP_ASSIGN_OR_RETURN(DeviceMemory tmp, scratch(m * n * 2, "an f16-accumulation GEMM output"));
  const __half one = __float2half(1.0f), zero = __float2half(0.0f);
  TP_BLAS(
      cublasGemmEx(blas_, op_b, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, t, ldb, a, t, int(k),
                   &zero, tmp.get(), CUDA_R_16F, int(n), CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (f16 accumulation)");
  TP_CUDA(cuda::widen(Src{tmp.get(), Storage::kF16}, m * n, out, stream_),
          "widening an f16-accumulation GEMM output");
  return Status();
}

// One plan run: the group loop of compiled/executor.cpp, on the device.
class GroupRun {
 public:
  GroupRun(CudaBackend& be, const Plan& plan, std::byte* arena, const BoundInputs& bound)
      : be_(be), plan_(plan), g_(*plan.graph), arena_(arena), bound_(bound) {}

  Status run(const Group& grp) {
    locals_.clear();
    const LayerPolicy& pol = grp.policy;
    const FaultSet& f = plan_.faults;
    for (int o : grp.ops) {
      const Op& op = g_.ops[std::size_t(o)];
      const std::string what = op.name + " (" + op_kind_name(op.kind) + ")";
      DeviceMemory out;
      if (op.kind >= OpKind::kConv) {
        TP_ASSIGN_OR_RETURN(out, nd_op(op, f, what));
        locals_[op.output] = std::move(out);
        continue;
      }
      // In a row-major plan the [B,C,H,W] kinds whose kernels index channels run on
      // channels-last copies (pointwise ops and adds do not care), as in the emulation.
      const bool relayout = plan_.row_major && channels_matter(op.kind);
      if (relayout)
        for (int v : op.inputs) TP_RETURN_IF_ERROR(to_channels_last(v, what));
      const Dims od = nhwc_dims(shape(op.output));
      switch (op.kind) {
        case OpKind::kUpsampleNearest2x: {
          if (grp.upsample_prologue) continue;  // the conv reads through it
          TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
          TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
          TP_CUDA(cuda::upsample_nearest2x(x.src, x.dims, out.get<float>(), be_.stream()), what);
          break;
        }
        case OpKind::kConv2d: {
          const bool up = grp.upsample_prologue;
          const int src = up ? g_.ops[std::size_t(grp.ops[0])].inputs[0] : op.inputs[0];
          const cuda::Upsample mode = !up ? cuda::Upsample::kNone
                                      : f.has(Fault::kUpsampleOffByOne)
                                          ? cuda::Upsample::kNearest2xOffByOne
                                          : cuda::Upsample::kNearest2x;
          TP_ASSIGN_OR_RETURN(out, conv(op, src, op.attrs, mode, od, pol.accumulation));
          break;
        }
        case OpKind::kLinear: {
          TP_ASSIGN_OR_RETURN(
              out, conv(op, op.inputs[0], OpAttrs{}, cuda::Upsample::kNone, od, pol.accumulation));
          break;
        }
        case OpKind::kGroupNorm: {
          TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
          TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
          TP_ASSIGN_OR_RETURN(const DeviceParam* gamma,
                              be_.param(plan_.params.at(op.weight), Storage::kF32));
          TP_ASSIGN_OR_RETURN(const DeviceParam* beta,
                              be_.param(plan_.params.at(op.bias), Storage::kF32));
          TP_ASSIGN_OR_RETURN(
              DeviceMemory ws,
              be_.scratch(int64_t(cuda::group_norm_workspace_bytes(od.b, op.attrs.groups)), what));
          TP_CUDA(cuda::group_norm(x.src, x.dims, op.attrs.groups, op.attrs.eps,
                                   gamma->values[0].get<float>(), beta->values[0].get<float>(),
                                   f.has(Fault::kGroupNormF16Accum), ws.get(), out.get<float>(),
                                   be_.stream()),
                  what);
          break;
        }
        case OpKind::kAttention: {
          TP_ASSIGN_OR_RETURN(out, attention(op, od, f.has(Fault::kSoftmaxNoMax), pol.activation));
          break;
        }
        case OpKind::kAdd: {
          TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
          TP_ASSIGN_OR_RETURN(Value a, value(op.inputs[0]));
          TP_ASSIGN_OR_RETURN(Value b, value(op.inputs[1]));
          if (a.dims.numel() != b.dims.numel())
            return Error(what + ": adds values of different sizes");
          TP_CUDA(cuda::add(a.src, b.src, od.numel(), out.get<float>(), be_.stream()), what);
          break;
        }
        case OpKind::kSliceChannels: {
          TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
          TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
          TP_CUDA(
              cuda::slice_channels(x.src, x.dims.b * x.dims.h * x.dims.w, x.dims.c, op.attrs.begin,
                                   op.attrs.end, out.get<float>(), be_.stream()),
              what);
          break;
        }
        default: {
          TP_ASSIGN_OR_RETURN(cuda::PointwiseArgs args, pointwise_args(op));
          TP_ASSIGN_OR_RETURN(out, be_.scratch(od.numel() * 4, what));
          TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
          TP_CUDA(cuda::pointwise(x.src, od.numel(), args, out.get<float>(), be_.stream()), what);
          break;
        }
      }
      if (relayout) {
        channels_last_.clear();
        TP_ASSIGN_OR_RETURN(out, to_row_major(out, op.output, what));
      }
      locals_[op.output] = std::move(out);
    }
    for (std::size_t i = 0; i < grp.outputs.size(); ++i) {
      const int v = grp.outputs[i];
      const Buffer& b = plan_.buffers.at(v);
      TP_ASSIGN_OR_RETURN(Storage s, storage_of(b.dtype));
      TP_CUDA(cuda::store_rounded(locals_.at(v).get<float>(), shape_numel(shape(v)), s,
                                  arena_ + b.offset, be_.stream()),
              "storing " + grp.checkpoints[i]);
    }
    TP_CUDA(cudaStreamSynchronize(be_.stream()),
            "group " + grp.label() + " (" + grp.checkpoints[0] + ")");
    locals_.clear();
    widened_.clear();
    host_tables_.clear();
    return Status();
  }

 private:
  struct Value {
    Src src;
    Dims dims;
  };

  const Shape& shape(int v) const { return bound_.shapes[std::size_t(v)]; }

  Expected<Value> value(int v) {
    const Dims d = nhwc_dims(shape(v));
    auto relaid = channels_last_.find(v);
    if (relaid != channels_last_.end()) return Value{Src{relaid->second.get(), Storage::kF32}, d};
    auto local = locals_.find(v);
    if (local != locals_.end()) return Value{Src{local->second.get(), Storage::kF32}, d};
    auto view = bound_.views.find(v);
    if (view != bound_.views.end()) {
      TP_ASSIGN_OR_RETURN(Storage s, storage_of(view->second.dtype));
      return Value{Src{view->second.data, s}, d};
    }
    const Buffer& b = plan_.buffers.at(v);
    TP_ASSIGN_OR_RETURN(Storage s, storage_of(b.dtype));
    return Value{Src{arena_ + b.offset, s}, d};
  }

  // A value as an fp32 device pointer: locals already are; others are widened into a local.
  Expected<const float*> as_f32(int v) {
    TP_ASSIGN_OR_RETURN(Value x, value(v));
    if (x.src.storage == Storage::kF32) return static_cast<const float*>(x.src.data);
    TP_ASSIGN_OR_RETURN(DeviceMemory m, be_.scratch(x.dims.numel() * 4, "widening a value"));
    TP_CUDA(cuda::widen(x.src, x.dims.numel(), m.get<float>(), be_.stream()), "widening a value");
    const float* p = m.get<float>();
    widened_.push_back(std::move(m));
    return p;
  }

  static Expected<cuda::PointwiseArgs> pointwise_args(const Op& op) {
    cuda::PointwiseArgs a;
    switch (op.kind) {
      case OpKind::kSilu:
        a.op = cuda::Pointwise::kSilu;
        break;
      case OpKind::kRelu:
        a.op = cuda::Pointwise::kRelu;
        break;
      case OpKind::kTanhClamp:
        a.op = cuda::Pointwise::kTanhClamp;
        break;
      case OpKind::kAffine:
        a.op = cuda::Pointwise::kAffine;
        break;
      case OpKind::kClamp:
        a.op = cuda::Pointwise::kClamp;
        break;
      default:
        return Error(op.name + ": the CUDA backend has no kernel for op " + op_kind_name(op.kind));
    }
    a.scale = float(op.attrs.scale);
    a.shift = float(op.attrs.shift);
    a.lo = float(op.attrs.lo);
    a.hi = float(op.attrs.hi);
    return a;
  }

  // conv2d / linear: patches gathered chunk by chunk into the workspace (or the input read in
  // place for a plain 1x1), one GEMM per chunk, then scale (fp8) and bias on the accumulator.
  Expected<DeviceMemory> conv(const Op& op, int src, const OpAttrs& a, cuda::Upsample up,
                              const Dims& od, DType accumulation) {
    const std::string what = op.name + " (" + op_kind_name(op.kind) + ")";
    TP_ASSIGN_OR_RETURN(Value x, value(src));
    const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
    const Storage operand = operand_for(x.src.storage, w->storage);
    TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, operand));
    const DeviceParam* db = nullptr;
    if (!op.bias.empty()) {
      TP_ASSIGN_OR_RETURN(db, be_.param(plan_.params.at(op.bias), Storage::kF32));
    }
    cuda::ConvGeometry g;
    g.kh = w->shape.size() == 4 ? int(w->shape[2]) : 1;
    g.kw = w->shape.size() == 4 ? int(w->shape[3]) : 1;
    g.stride = a.stride;
    g.pad_top = a.pad_top;
    g.pad_left = a.pad_left;
    g.hin = up == cuda::Upsample::kNone ? x.dims.h : 2 * x.dims.h;
    g.win = up == cuda::Upsample::kNone ? x.dims.w : 2 * x.dims.w;
    g.ho = od.h;
    g.wo = od.w;
    const int64_t co = od.c, k = int64_t(g.kh) * g.kw * x.dims.c;
    if (int64_t(w->values.size()) != co * k)
      return Error(w->key + ": weight does not match the input's channels");
    const bool f16_acc = accumulation == DType::kF16 && operand == Storage::kF16;
    TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(od.numel() * 4, what));
    const void* wp = dw->values[std::size_t(operand)].get();
    const bool direct = g.kh == 1 && g.kw == 1 && a.stride == 1 && up == cuda::Upsample::kNone &&
                        a.pad_top == 0 && a.pad_left == 0 && a.pad_bottom == 0 &&
                        a.pad_right == 0 && operand == x.src.storage;
    if (direct) {
      TP_RETURN_IF_ERROR(be_.gemm(x.src.data, wp, operand, od.b * od.h * od.w, co, k, true, f16_acc,
                                  out.get<float>()));
    } else {
      const int64_t row_bytes = g.wo * k * int64_t(storage_size(operand));
      const int64_t rows =
          std::max<int64_t>(1, std::min<int64_t>(g.ho, kWorkspaceBytes / row_bytes));
      TP_ASSIGN_OR_RETURN(DeviceMemory patches, be_.scratch(rows * row_bytes, what + " patches"));
      for (int64_t n = 0; n < od.b; ++n)
        for (int64_t y0 = 0; y0 < g.ho; y0 += rows) {
          const int64_t r = std::min(rows, g.ho - y0);
          TP_CUDA(
              cuda::im2col(x.src, x.dims, n, y0, r, g, up, operand, patches.get(), be_.stream()),
              what + " patches");
          TP_RETURN_IF_ERROR(be_.gemm(patches.get(), wp, operand, r * g.wo, co, k, true, f16_acc,
                                      out.get<float>() + (n * g.ho + y0) * g.wo * co));
        }
    }
    TP_CUDA(cuda::scale_bias(out.get<float>(), od.b * od.h * od.w, co, dw->scales.get<float>(),
                             db ? db->values[0].get<float>() : nullptr, be_.stream()),
            what + " scale and bias");
    return out;
  }

  // softmax(q k^T * scale) v, one block of query rows at a time (rows x N scores at most).
  Expected<DeviceMemory> attention(const Op& op, const Dims& od, bool no_max, DType activation) {
    const std::string what = op.name + " (attention)";
    const Dims qd = nhwc_dims(shape(op.inputs[0])), vd = nhwc_dims(shape(op.inputs[2]));
    TP_ASSIGN_OR_RETURN(const float* q, as_f32(op.inputs[0]));
    TP_ASSIGN_OR_RETURN(const float* k, as_f32(op.inputs[1]));
    TP_ASSIGN_OR_RETURN(const float* v, as_f32(op.inputs[2]));
    TP_ASSIGN_OR_RETURN(Storage act, storage_of(activation));
    const int64_t n = qd.h * qd.w, c = qd.c, cv = vd.c;
    const int64_t rows = std::max<int64_t>(1, std::min<int64_t>(n, kWorkspaceBytes / (n * 4)));
    TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(od.numel() * 4, what));
    TP_ASSIGN_OR_RETURN(DeviceMemory scores, be_.scratch(rows * n * 4, what + " scores"));
    for (int64_t b = 0; b < qd.b; ++b)
      for (int64_t q0 = 0; q0 < n; q0 += rows) {
        const int64_t r = std::min(rows, n - q0);
        TP_RETURN_IF_ERROR(be_.gemm(q + (b * n + q0) * c, k + b * n * c, Storage::kF32, r, n, c,
                                    true, false, scores.get<float>()));
        TP_CUDA(cuda::softmax_rows(scores.get<float>(), r, n, float(op.attrs.scale), no_max, act,
                                   be_.stream()),
                what + " softmax");
        TP_RETURN_IF_ERROR(be_.gemm(scores.get<float>(), v + b * n * cv, Storage::kF32, r, cv, n,
                                    false, false, out.get<float>() + (b * n + q0) * cv));
      }
    return out;
  }

  static bool channels_matter(OpKind k) {
    return k == OpKind::kConv2d || k == OpKind::kLinear || k == OpKind::kGroupNorm ||
           k == OpKind::kAttention || k == OpKind::kUpsampleNearest2x ||
           k == OpKind::kSliceChannels;
  }
  // A row-major [B, C, *S] value as an fp32 channels-last copy that value() then returns.
  Status to_channels_last(int v, const std::string& what) {
    if (channels_last_.count(v)) return Status();
    TP_ASSIGN_OR_RETURN(Value x, value(v));
    const Shape& s = shape(v);
    const int64_t plane = shape_numel(s) / (s[0] * s[1]);
    TP_ASSIGN_OR_RETURN(DeviceMemory m, be_.scratch(shape_numel(s) * 4, what + " channels last"));
    TP_CUDA(cuda::transpose_channels(x.src, s[0], s[1], plane, true, m.get<float>(), be_.stream()),
            what + " channels last");
    channels_last_[v] = std::move(m);
    return Status();
  }
  Expected<DeviceMemory> to_row_major(const DeviceMemory& last, int v, const std::string& what) {
    const Shape& s = shape(v);
    const int64_t plane = shape_numel(s) / (s[0] * s[1]);
    TP_ASSIGN_OR_RETURN(DeviceMemory m, be_.scratch(shape_numel(s) * 4, what + " row-major"));
    TP_CUDA(cuda::transpose_channels(Src{last.get(), Storage::kF32}, s[0], s[1], plane, false,
                                     m.get<float>(), be_.stream()),
            what + " row-major");
    return m;
  }

  // ---- The N-dimensional ops (row-major values in their logical shapes).
  Expected<cuda::Strides> strides(const Shape& out, const std::vector<int64_t>& source,
                                  const std::string& what) const {
    if (out.size() > std::size_t(cuda::kMaxRank))
      return Error(what + ": tensors of rank " + std::to_string(out.size()) +
                   " have no CUDA kernel (at most " + std::to_string(cuda::kMaxRank) +
                   "); run it on the CPU emulation (--device cpu)");
    cuda::Strides st;
    st.rank = int(out.size());
    for (std::size_t d = 0; d < out.size(); ++d) {
      st.dims[d] = out[d];
      st.strides[d] = source[d];
    }
    return st;
  }
  static void split_at(const Shape& s, int axis, int64_t& outer, int64_t& along, int64_t& inner) {
    outer = along = inner = 1;
    for (int i = 0; i < int(s.size()); ++i)
      (i < axis ? outer : i == axis ? along : inner) *= s[std::size_t(i)];
  }
  // A parameter's fp32 values on the device, or null when the op has none (an empty key).
  Expected<const float*> optional_param(const std::string& key) {
    if (key.empty()) return static_cast<const float*>(nullptr);
    TP_ASSIGN_OR_RETURN(const DeviceParam* p, be_.param(plan_.params.at(key), Storage::kF32));
    return static_cast<const float*>(p->values[0].get<float>());
  }
  // The GEMM operand for x against weights `w`: x itself when its storage is the operand dtype,
  // else x widened to fp32 against fp32 weights.
  Expected<std::pair<const void*, Storage>> matrix_operand(int x, const PreparedParam& w) {
    TP_ASSIGN_OR_RETURN(Value v, value(x));
    const Storage operand = operand_for(v.src.storage, w.storage);
    if (operand == v.src.storage) return std::pair<const void*, Storage>{v.src.data, operand};
    TP_ASSIGN_OR_RETURN(const float* wide, as_f32(x));
    return std::pair<const void*, Storage>{wide, Storage::kF32};
  }

  Expected<DeviceMemory> nd_op(const Op& op, const FaultSet& f, const std::string& what) {
    const Shape& os = shape(op.output);
    const int64_t n = shape_numel(os);
    const OpAttrs& a = op.attrs;
    switch (op.kind) {
      case OpKind::kConv:
        return conv_nd(op, what);
      case OpKind::kLinearLast:
        return linear_last(op, what);
      case OpKind::kMultiHeadAttention:
        return multi_head_attention(op, f.has(Fault::kCrossAttentionQueryLength), what);
      default:
        break;
    }
    TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(n * 4, what));
    float* po = out.get<float>();
    cudaStream_t st = be_.stream();
    const Shape& xs = shape(op.inputs[0]);
    TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
    switch (op.kind) {
      case OpKind::kLayerNorm:
      case OpKind::kRmsNorm: {
        const bool rms = op.kind == OpKind::kRmsNorm;
        int64_t width = rms ? xs.back() : 1;
        for (int i = int(xs.size()) - a.norm_dims; !rms && i < int(xs.size()); ++i)
          width *= xs[std::size_t(i)];
        TP_ASSIGN_OR_RETURN(const float* gamma, optional_param(op.weight));
        TP_ASSIGN_OR_RETURN(const float* beta, optional_param(rms ? "" : op.bias));
        TP_CUDA(cuda::layer_norm(x.src, n / width, width, a.eps, rms, gamma, beta, po, st), what);
        break;
      }
      case OpKind::kGelu: {
        cuda::PointwiseArgs args;
        args.op = a.tanh_approximation ? cuda::Pointwise::kGeluTanh : cuda::Pointwise::kGelu;
        TP_CUDA(cuda::pointwise(x.src, n, args, po, st), what);
        break;
      }
      case OpKind::kReshape:  // row-major: the same elements in the same order
        TP_CUDA(cuda::widen(x.src, n, po, st), what);
        break;
      case OpKind::kPermute: {
        std::vector<int64_t> in_strides(xs.size(), 1), source(xs.size());
        for (int d = int(xs.size()) - 2; d >= 0; --d)
          in_strides[std::size_t(d)] = in_strides[std::size_t(d) + 1] * xs[std::size_t(d) + 1];
        for (std::size_t d = 0; d < xs.size(); ++d) source[d] = in_strides[std::size_t(a.dims[d])];
        TP_ASSIGN_OR_RETURN(cuda::Strides s, strides(os, source, what));
        TP_CUDA(cuda::gather(x.src, s, po, st), what);
        break;
      }
      case OpKind::kBinary: {
        TP_ASSIGN_OR_RETURN(Value y, value(op.inputs[1]));
        TP_ASSIGN_OR_RETURN(cuda::Strides sa, strides(os, broadcast_strides(xs, os), what));
        TP_ASSIGN_OR_RETURN(cuda::Strides sb,
                            strides(os, broadcast_strides(shape(op.inputs[1]), os), what));
        TP_CUDA(cuda::binary(cuda::Binary(int(a.binary)), x.src, sa, y.src, sb, po, st), what);
        break;
      }
      case OpKind::kConcat: {
        const int axis = a.axis < 0 ? a.axis + int(os.size()) : a.axis;
        int64_t outer, along, inner, offset = 0;
        split_at(os, axis, outer, along, inner);
        for (int v : op.inputs) {
          TP_ASSIGN_OR_RETURN(Value part, value(v));
          const int64_t width = shape(v)[std::size_t(axis)] * inner;
          TP_CUDA(cuda::copy_blocks(part.src, outer, width, width, 0, po, along * inner,
                                    offset * inner, st),
                  what);
          offset += shape(v)[std::size_t(axis)];
        }
        break;
      }
      case OpKind::kSlice: {
        const int axis = a.axis < 0 ? a.axis + int(xs.size()) : a.axis;
        int64_t outer, along, inner, begin = a.begin;
        split_at(xs, axis, outer, along, inner);
        // The faults: a half taken along the last axis (GEGLU's chunk) or the batch (guidance's)
        // is the other half.
        const bool half = 2 * os[std::size_t(axis)] == along;
        if (half && ((axis == int(xs.size()) - 1 && f.has(Fault::kGegluSwap)) ||
                     (axis == 0 && f.has(Fault::kCfgHalvesSwapped))))
          begin = (begin + along / 2) % along;
        const int64_t width = os[std::size_t(axis)] * inner;
        TP_CUDA(
            cuda::copy_blocks(x.src, outer, width, along * inner, begin * inner, po, width, 0, st),
            what);
        break;
      }
      case OpKind::kTimestepEmbedding: {
        const int64_t half = a.embedding_dim / 2;
        const bool sin_second = a.flip_sin_to_cos != f.has(Fault::kTimestepSinCosSwap);
        TP_CUDA(cuda::timestep_embedding(x.src, shape_numel(xs), a.embedding_dim, !sin_second,
                                         float(double(half) - a.shift), po, st),
                what);
        break;
      }
      case OpKind::kInterpolateNearest: {
        const int spatial = int(xs.size()) - 2;
        if (spatial < 1 || spatial > 3) return Error(what + ": resizes 1 to 3 spatial axes");
        cuda::Resize r;
        r.planes = xs[0] * xs[1];
        std::array<DeviceMemory, 3> tables;
        for (int i = 0; i < spatial; ++i) {
          const int d = 3 - spatial + i;
          const int64_t in = xs[std::size_t(i) + 2], out_i = os[std::size_t(i) + 2];
          r.in[d] = in;
          r.out[d] = out_i;
          // PyTorch's "nearest": floor(dst * float(in / out)), exact halving when out is 2 in.
          const float ratio = float(in) / float(out_i);
          std::vector<int64_t>& src = host_tables_.emplace_back();
          for (int64_t o = 0; o < out_i; ++o)
            src.push_back(out_i == in ? o
                          : out_i == 2 * in
                              ? o / 2
                              : std::min(int64_t(std::floor(float(o) * ratio)), in - 1));
          TP_ASSIGN_OR_RETURN(tables[std::size_t(d)],
                              be_.scratch(int64_t(src.size() * sizeof(int64_t)), what));
          TP_CUDA(cudaMemcpyAsync(tables[std::size_t(d)].get(), src.data(),
                                  src.size() * sizeof(int64_t), cudaMemcpyHostToDevice, st),
                  what + " source indices");
          r.source[d] = tables[std::size_t(d)].get<int64_t>();
        }
        TP_CUDA(cuda::interpolate_nearest(x.src, r, po, st), what);
        for (DeviceMemory& t : tables) widened_.push_back(std::move(t));  // freed after the group
        break;
      }
      default:
        return Error(what + ": the CUDA backend has no kernel for op " + op_kind_name(op.kind));
    }
    return out;
  }

  // x [B, Cin, *S] (1 to 3 spatial axes) against weights stored [Cout][*K][Cin/groups]: per image
  // and channel group, patches [rows][taps][Cin/groups] and one GEMM writing [Cout/groups][rows]
  // straight into the row-major output; a plain 1x1 conv reads its input in place.
  Expected<DeviceMemory> conv_nd(const Op& op, const std::string& what) {
    const OpAttrs& a = op.attrs;
    const Shape& xs = shape(op.inputs[0]);
    const Shape& os = shape(op.output);
    const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
    const int spatial = int(xs.size()) - 2;
    if (spatial < 1 || spatial > 3) return Error(what + ": convolves 1 to 3 spatial axes");
    cuda::ConvNd g;
    g.cin = xs[1];
    g.cin_g = xs[1] / a.conv_groups;
    const int64_t cout = w->shape[0], cout_g = cout / a.conv_groups;
    for (int i = 0; i < spatial; ++i) {
      const int d = 3 - spatial + i;
      g.in[d] = xs[std::size_t(i) + 2];
      g.out[d] = os[std::size_t(i) + 2];
      g.k[d] = w->shape[std::size_t(i) + 2];
      g.stride[d] = a.strides[std::size_t(i)];
      g.dil[d] = a.dilations[std::size_t(i)];
      g.lo[d] = a.pads_lo[std::size_t(i)];
    }
    g.replicate = a.pad_mode == PadMode::kReplicate;
    const int64_t k = g.taps() * g.cin_g, plane = g.out_plane();
    if (int64_t(w->values.size()) != cout * k)
      return Error(w->key + ": weight does not match the input's channels");
    TP_ASSIGN_OR_RETURN(Value x, value(op.inputs[0]));
    const Storage operand = operand_for(x.src.storage, w->storage);
    TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, operand));
    const auto* wp = static_cast<const std::byte*>(dw->values[std::size_t(operand)].get());
    const int64_t wsize = int64_t(storage_size(operand));
    TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(shape_numel(os) * 4, what));
    bool pointwise_conv =
        a.conv_groups == 1 && g.taps() == 1 && operand == x.src.storage && g.in_plane() == plane;
    for (int i = 0; i < 3; ++i) pointwise_conv = pointwise_conv && g.stride[i] == 1 && g.lo[i] == 0;
    if (pointwise_conv) {  // out_n [Cout][P] = W [Cout][Cin] x_n [Cin][P]
      const auto* px = static_cast<const std::byte*>(x.src.data);
      for (int64_t n = 0; n < xs[0]; ++n)
        TP_RETURN_IF_ERROR(be_.gemm(wp, px + n * g.cin * plane * wsize, operand, cout, plane, k,
                                    false, false, out.get<float>() + n * cout * plane));
    } else {
      const int64_t row_bytes = k * wsize;
      const int64_t rows =
          std::max<int64_t>(1, std::min<int64_t>(plane, kWorkspaceBytes / row_bytes));
      TP_ASSIGN_OR_RETURN(DeviceMemory patches, be_.scratch(rows * row_bytes, what + " patches"));
      for (int64_t n = 0; n < xs[0]; ++n)
        for (int64_t grp = 0; grp < a.conv_groups; ++grp)
          for (int64_t p0 = 0; p0 < plane; p0 += rows) {
            const int64_t r = std::min(rows, plane - p0);
            TP_CUDA(cuda::im2col_nd(x.src, g, n, grp, p0, r, operand, patches.get(), be_.stream()),
                    what + " patches");
            TP_RETURN_IF_ERROR(
                be_.gemm(wp + grp * cout_g * k * wsize, patches.get(), operand, cout_g, r, k, true,
                         false, out.get<float>() + (n * cout + grp * cout_g) * plane + p0, plane));
          }
    }
    TP_ASSIGN_OR_RETURN(const float* bias, optional_param(op.bias));
    TP_CUDA(cuda::scale_bias_strided(out.get<float>(), shape_numel(os), cout, plane,
                                     dw->scales.get<float>(), bias, be_.stream()),
            what + " scale and bias");
    return out;
  }

  // Over the last axis: out [rows][Dout] = x [rows][Din] W^T, then scale (fp8) and bias.
  Expected<DeviceMemory> linear_last(const Op& op, const std::string& what) {
    const std::shared_ptr<const PreparedParam>& w = plan_.params.at(op.weight);
    const int64_t din = w->shape[1], dout = w->shape[0];
    const int64_t rows = shape_numel(shape(op.inputs[0])) / din;
    TP_ASSIGN_OR_RETURN(auto x, matrix_operand(op.inputs[0], *w));
    TP_ASSIGN_OR_RETURN(const DeviceParam* dw, be_.param(w, x.second));
    TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(rows * dout * 4, what));
    TP_RETURN_IF_ERROR(be_.gemm(x.first, dw->values[std::size_t(x.second)].get(), x.second, rows,
                                dout, din, true, false, out.get<float>()));
    TP_ASSIGN_OR_RETURN(const float* bias, optional_param(op.bias));
    TP_CUDA(cuda::scale_bias_strided(out.get<float>(), rows * dout, dout, 1,
                                     dw->scales.get<float>(), bias, be_.stream()),
            what + " scale and bias");
    return out;
  }

  Expected<DeviceMemory> multi_head_attention(const Op& op, bool keys_as_queries,
                                              const std::string& what) {
    const Shape &qs = shape(op.inputs[0]), &ks = shape(op.inputs[1]), &vs = shape(op.inputs[2]);
    cuda::AttentionShape s;
    s.batch = qs[0];
    s.queries = qs[1];
    s.heads = op.attrs.heads;
    s.stored_keys = ks[1];
    s.keys = keys_as_queries ? std::min(s.stored_keys, s.queries) : s.stored_keys;  // the fault
    s.dh = qs[2] / s.heads;
    s.dv = vs[2] / s.heads;
    s.frame_tokens = op.attrs.frame_tokens;
    s.scale = float(op.attrs.scale);
    if (std::max(s.dh, s.dv) > cuda::kMaxHeadDim)
      return Error(what + ": heads of dimension " + std::to_string(std::max(s.dh, s.dv)) +
                   " have no CUDA kernel (at most " + std::to_string(cuda::kMaxHeadDim) +
                   "); run it on the CPU emulation (--device cpu)");
    TP_ASSIGN_OR_RETURN(const float* q, as_f32(op.inputs[0]));
    TP_ASSIGN_OR_RETURN(const float* k, as_f32(op.inputs[1]));
    TP_ASSIGN_OR_RETURN(const float* v, as_f32(op.inputs[2]));
    const float* mask = nullptr;
    if (op.inputs.size() > 3) {
      TP_ASSIGN_OR_RETURN(mask, as_f32(op.inputs[3]));
      s.mask_batch = shape(op.inputs[3]).size() == 3 ? s.queries * s.stored_keys : 0;
    }
    TP_ASSIGN_OR_RETURN(DeviceMemory out, be_.scratch(s.batch * s.queries * vs[2] * 4, what));
    TP_CUDA(cuda::multi_head_attention(q, k, v, mask, s, out.get<float>(), be_.stream()), what);
    return out;
  }

  CudaBackend& be_;
  const Plan& plan_;
  const Graph& g_;
  std::byte* arena_;
  const BoundInputs& bound_;
  std::map<int, DeviceMemory> locals_;
  std::map<int, DeviceMemory> channels_last_;  // row-major values copied for a [B,C,H,W] kind
  std::vector<DeviceMemory> widened_;
  std::vector<std::vector<int64_t>> host_tables_;  // host sources of async uploads, per group
};

// `t` rounded once into its buffer's dtype, channels-last, into the arena.
Status upload(const Plan& plan, std::byte* arena, int value, const Tensor& t) {
  const Buffer& b = plan.buffers.at(value);
  std::vector<std::byte> staged(std::size_t(t.numel()) * dtype_size(b.dtype));
  stage_input(plan, t, b.dtype, staged.data());
  TP_CUDA(cudaMemcpy(arena + b.offset, staged.data(), staged.size(), cudaMemcpyHostToDevice),
          "uploading " + plan.graph->value_names[std::size_t(value)] + " to the GPU");
  return Status();
}

Expected<std::vector<Tensor>> CudaBackend::run_group(const Plan& plan, std::byte* arena, int index,
                                                     const Shape& input_shape,
                                                     const std::map<int, Tensor>& values) {
  BoundInputs bound;
  TP_ASSIGN_OR_RETURN(bound.shapes, bind_group_inputs(plan, index, input_shape, values));
  const Group& grp = plan.groups[std::size_t(index)];
  for (int v : grp.inputs) TP_RETURN_IF_ERROR(upload(plan, arena, v, values.at(v)));
  TP_RETURN_IF_ERROR(GroupRun(*this, plan, arena, bound).run(grp));
  std::vector<Tensor> out;
  for (int v : grp.outputs) {
    TP_ASSIGN_OR_RETURN(Tensor t, read(plan, arena, v, bound.shapes[std::size_t(v)]));
    out.push_back(std::move(t));
  }
  return out;
}

Status CudaBackend::execute(const Plan& plan, std::byte* arena,
                            const std::vector<PlanInput>& inputs, const GroupObserver& observe) {
  TP_ASSIGN_OR_RETURN(BoundInputs bound, bind_inputs(plan, inputs));
  for (const auto& [v, t] : bound.uploads) TP_RETURN_IF_ERROR(upload(plan, arena, v, *t));
  GroupRun run(*this, plan, arena, bound);
  for (const Group& grp : plan.groups) {
    TP_RETURN_IF_ERROR(run.run(grp));
    if (!observe) continue;
    NamedTensors stored;
    for (std::size_t i = 0; i < grp.outputs.size(); ++i) {
      TP_ASSIGN_OR_RETURN(
          Tensor t, read(plan, arena, grp.outputs[i], bound.shapes[std::size_t(grp.outputs[i])]));
      stored.emplace_back(grp.checkpoints[i], std::move(t));
    }
    observe(grp, stored);
  }
  return Status();
}

}  // namespace

Expected<std::unique_ptr<Backend>> make_cuda_backend() {
  if (cuda_device_count() == 0)
    return Error(
        "compiled:cuda: no CUDA device is visible on this machine; run on a machine with an NVIDIA "
        "GPU, or use "
        "compiled:cpu, which runs the same plans under the same numerics contract");
  auto backend = std::make_unique<CudaBackend>();
  TP_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tp::compiled
