// The CUDA backend's parts its files share (compiled/kernels/cuda only): checked CUDA and cuBLAS
// calls, device memory from the stream-ordered pool, weights on the device, the backend itself
// and GroupRun, which runs one plan group by group (group_run.cpp: the [B,C,H,W] kinds and the
// group loop; group_run_nd.cpp: the N-dimensional ops).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiled/backend.h"
#include "compiled/device.h"
#include "compiled/fused_groups.h"
#include "compiled/kernels/cuda/captured_plans.h"
#include "compiled/kernels/cuda/cudnn_conv.h"
#include "compiled/kernels/cuda/kernels.h"

namespace tp::compiled::cuda_impl {

using cuda::Dims;
using cuda::Src;
using cuda::Storage;

constexpr int64_t kWorkspaceBytes = int64_t(256)
                                    << 20;  // patches of a conv chunk; scores of an attention block

// A CUDA or cuBLAS status as one sentence naming `what` (and the fix for a missing kernel image
// or an exhausted GPU); success is an empty Status.
Status cuda_status(cudaError_t e, const std::string& what);
Status blas_status(cublasStatus_t s, const std::string& what);

#define TP_CUDA(call, what) TP_RETURN_IF_ERROR(cuda_status((call), (what)))
#define TP_BLAS(call, what) TP_RETURN_IF_ERROR(blas_status((call), (what)))

inline Expected<Storage> storage_of(DType dt) {
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

inline DType dtype_of(Storage s) {
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
    // A failed free leaves a sticky error that the next checked call on the stream reports.
    if (p_ && cudaFreeAsync(p_, stream_) != cudaSuccess)
      std::fprintf(stderr, "twinpath: cudaFreeAsync failed: %s\n",
                   cudaGetErrorString(cudaGetLastError()));
    p_ = nullptr;
  }
  void* p_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// A reusable page-locked host buffer for the inputs a run uploads and the values it reads back:
// copies from it are truly asynchronous and run at the link's full speed (a pageable buffer is
// staged by the driver first). `acquire` waits until the last copy that used it has finished, so
// its bytes can be rewritten; `mark_used` records that point after a copy is enqueued.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();
  Expected<std::byte*> acquire(int64_t bytes, const std::string& what);
  Status mark_used(cudaStream_t stream, const std::string& what);

 private:
  std::byte* p_ = nullptr;
  int64_t size_ = 0;
  cudaEvent_t last_use_ = nullptr;
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
inline Storage operand_for(Storage src, DType w) {
  if (src == Storage::kF16 && (w == DType::kF16 || dtype_is_fp8(w))) return Storage::kF16;
  if (src == Storage::kBF16 && (w == DType::kBF16 || dtype_is_fp8(w))) return Storage::kBF16;
  return Storage::kF32;
}

// A conv's weights hold `count` values: output channels x kernel taps x input channels.
inline Status check_weight_count(const PreparedParam& w, int64_t count) {
  if (w.count() == count) return Status();
  return Error(w.key + ": weight does not match the input's channels");
}

inline cudaDataType_t blas_type(Storage s) {
  return s == Storage::kF16 ? CUDA_R_16F : s == Storage::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

inline std::size_t storage_size(Storage s) { return s == Storage::kF32 ? 4 : 2; }

// A value's channels-last extents: [B, H, W, C] for [B, C, H, W]; other ranks of [B, C, *S] as
// [B, prod S, 1, C] (all GroupNorm's statistics need); ranks below 2 as one row.
inline Dims nhwc_dims(const Shape& s) {
  if (s.size() == 4) return Dims{s[0], s[2], s[3], s[1]};
  if (s.size() < 2) return Dims{1, 1, 1, shape_numel(s)};
  return Dims{s[0], shape_numel(s) / std::max<int64_t>(1, s[0] * s[1]), 1, s[1]};
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(CudaKernels kernels, bool graphs)
      : kernels_(kernels), captured_(graphs ? std::make_unique<CapturedPlans>() : nullptr) {}
  ~CudaBackend() override {
    if (stream_) cudaStreamSynchronize(stream_);  // no copy still reads the staging buffer
    captured_.reset();
    params_.clear();
    cudnn_.reset();
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
    if (kernels_ == CudaKernels::kFused) {
      TP_ASSIGN_OR_RETURN(cudnn_, CudnnConvs::create(stream_));
    }
    return Status();
  }

  std::string device() const override { return "cuda"; }
  std::string description() const override {
    return cuda_device_description(0) + ", " + cuda_kernels_name(kernels_) + " kernels" +
           (captured_ ? ", CUDA graphs" : "");
  }
  void time_groups(bool on) override { time_groups_ = on; }
  GroupTimes group_times(const Plan& plan) const override {
    auto it = group_times_.find(plan.key);
    return it == group_times_.end() ? GroupTimes{} : it->second;
  }
  std::string notes() const override {
    std::string s = cudnn_ ? cudnn_->summary() : "";
    if (captured_) s += (s.empty() ? "" : "; ") + captured_->summary();
    return s;
  }
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
    // NaN in f32, f16 and bf16; on the stream the groups run on, so it lands before they write.
    TP_CUDA(cudaMemsetAsync(p, 0xFF, std::size_t(bytes), stream_), "poisoning the arena");
    return static_cast<std::byte*>(p);
  }
  void release(std::byte* arena) override {
    if (!arena) return;
    cudaStreamSynchronize(stream_);
    if (captured_) captured_->forget(arena);  // its graphs write this arena
    cudaFree(arena);
  }

  Status execute(const Plan& plan, std::byte* arena, const std::vector<PlanInput>& inputs,
                 const GroupObserver& observe) override;
  Expected<std::vector<Tensor>> run_group(const Plan& plan, std::byte* arena, int index,
                                          const Shape& input_shape,
                                          const std::map<int, Tensor>& values) override;

  Expected<Tensor> read(const Plan& plan, const std::byte* arena, int value,
                        const Shape& shape) override;
  // `t` rounded into value's buffer, in the plan's layout, on the stream.
  Status upload(const Plan& plan, std::byte* arena, int value, const Tensor& t);

  // Device-side helpers the group runner uses.
  cudaStream_t stream() const { return stream_; }
  Expected<DeviceMemory> scratch(int64_t bytes, const std::string& what) {
    return DeviceMemory::allocate(bytes, stream_, what);
  }
  Expected<const DeviceParam*> param(const std::shared_ptr<const PreparedParam>& p,
                                     Storage operand);
  // Row-major out[m][n] = a[m][k] * b^T with b [n][k] (`b_transposed`), or a * b with b [k][n];
  // out's rows `ldc` apart (0: n), a's `lda` (0: k), b's `ldb` (0: k or n, as stored).
  Status gemm(const void* a, const void* b, Storage operand, int64_t m, int64_t n, int64_t k,
              bool b_transposed, bool f16_accumulation, float* out, int64_t ldc = 0,
              int64_t lda = 0, int64_t ldb = 0);
  // The fused kernel set's cuDNN convs; null under per-op.
  CudnnConvs* cudnn() const { return cudnn_.get(); }

 private:
  CudaKernels kernels_;
  std::unique_ptr<CudnnConvs> cudnn_;
  std::unique_ptr<CapturedPlans> captured_;  // under TWINPATH_CUDA_GRAPHS=1
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::map<const PreparedParam*, DeviceParam> params_;
  PinnedStaging staging_;
  bool time_groups_ = false;
  std::map<std::string, GroupTimes> group_times_;  // by plan key
  // The group loop with a CUDA event between groups, their times added to group_times_.
  Status execute_timed(const Plan& plan, std::byte* arena, const BoundInputs& bound);
};

// TWINPATH_CUDA_HOST_TRANSPOSE=1: channels-last uploads and read-backs transposed on the host,
// as the first GPU run did (the device transposes passed gpu_tests on an H100, 2026-11-26).
inline bool host_transposes() {
  static const bool host = [] {
    const char* v = std::getenv("TWINPATH_CUDA_HOST_TRANSPOSE");
    return v && std::string(v) == "1";
  }();
  return host;
}

// TWINPATH_CUDA_SYNC=1: wait for each group to finish (slower; a device-side error then names
// the group it happened in).
inline bool sync_each_group() {
  static const bool sync = [] {
    const char* v = std::getenv("TWINPATH_CUDA_SYNC");
    return v && std::string(v) == "1";
  }();
  return sync;
}

// One plan run: the group loop of compiled/executor.cpp, on the device.
class GroupRun {
 public:
  GroupRun(CudaBackend& be, const Plan& plan, std::byte* arena, const BoundInputs& bound)
      : be_(be), plan_(plan), g_(*plan.graph), arena_(arena), bound_(bound) {}

  Status run(const Group& grp);

 private:
  // The fused kernel set (compiled/fused_groups.h): true when the group ran fused and its output
  // is stored; false when it has no fused form here (the per-op kernels run it).
  Expected<bool> run_fused(const Group& grp);
  Expected<bool> fused_conv(const Group& grp, const ConvEpilogue& m);
  Expected<bool> fused_norm(const Group& grp, const NormActivation& m);
  // After a group: launch errors checked (and the stream synchronized under TWINPATH_CUDA_SYNC=1),
  // the group's scratch released.
  Status finish(const Group& grp);

  struct Value {
    Src src;
    Dims dims;
  };

  const Shape& shape(int v) const { return bound_.shapes[std::size_t(v)]; }
  // A value's channels-last extents; an image attention's tokens [B,H*W,C] in a channels-last
  // plan as [B, H*W, 1, C] (the image's own memory).
  Dims dims_of(int v) const {
    const Shape& s = shape(v);
    if (!plan_.row_major && s.size() == 3) return Dims{s[0], s[1], 1, s[2]};
    return nhwc_dims(s);
  }

  Expected<Value> value(int v);

  // A value as an fp32 device pointer: locals already are; others are widened into a local.
  Expected<const float*> as_f32(int v);

  static Expected<cuda::PointwiseArgs> pointwise_args(const Op& op);

  // conv2d / linear: patches gathered chunk by chunk into the workspace (or the input read in
  // place for a plain 1x1), one GEMM per chunk, then scale (fp8) and bias on the accumulator.
  Expected<DeviceMemory> conv(const Op& op, int src, const Conv2dWindow& a, cuda::Upsample up,
                              const Dims& od, DType accumulation);

  // softmax(q k^T * scale) v, one block of query rows at a time (rows x N scores at most);
  // `operands` f16/bf16 (attn=act): q, k, v and P rounded to it, the products on tensor cores.
  Expected<DeviceMemory> attention(const Op& op, const Dims& od, bool no_max, DType activation,
                                   DType operands);

  static bool channels_matter(OpKind k);
  // A row-major [B, C, *S] value as an fp32 channels-last copy that value() then returns.
  Status to_channels_last(int v, const std::string& what);
  Expected<DeviceMemory> to_row_major(const DeviceMemory& last, int v, const std::string& what);

  // ---- The N-dimensional ops (row-major values in their logical shapes).
  Expected<cuda::Strides> strides(const Shape& out, const std::vector<int64_t>& source,
                                  const std::string& what) const;
  static void split_at(const Shape& s, int axis, int64_t& outer, int64_t& along, int64_t& inner);
  // A parameter's fp32 values on the device, or null when the op has none (an empty key).
  Expected<const float*> optional_param(const std::string& key);
  // The GEMM operand for x against weights `w`: x itself when its storage is the operand dtype,
  // else x widened to fp32 against fp32 weights.
  Expected<std::pair<const void*, Storage>> matrix_operand(int x, const PreparedParam& w);

  // `pol`: the group's policy (the softmax-no-max fault rounds exp(s) to its activation dtype;
  // attn=act rounds attention's operands to it).
  Expected<DeviceMemory> nd_op(const Op& op, const FaultSet& f, const LayerPolicy& pol,
                               const std::string& what);

  // x [B, Cin, *S] (1 to 3 spatial axes) against weights stored [Cout][*K][Cin/groups]: per image
  // and channel group, patches [rows][taps][Cin/groups] and one GEMM writing [Cout/groups][rows]
  // straight into the row-major output; a plain 1x1 conv reads its input in place.
  Expected<DeviceMemory> conv_nd(const Op& op, const std::string& what);

  // Over the last axis: out [rows][Dout] = x [rows][Din] W^T, then scale (fp8) and bias.
  Expected<DeviceMemory> linear_last(const Op& op, const std::string& what);

  Expected<DeviceMemory> multi_head_attention(const Op& op, const FaultSet& f,
                                              const LayerPolicy& pol, const std::string& what);
  // Unmasked attention as the emulation's multi_head_attention_gemm computes it: per batch, head
  // and block of query rows, the scores Q_h K_h^T by cuBLAS (rows x keys at most), the softmax,
  // then P V_h; under attn=act (`operands` f16/bf16) q, k, v and P rounded first, both products
  // on tensor cores with fp32 accumulation.
  Expected<DeviceMemory> attention_by_gemm(const Op& op, const cuda::AttentionShape& s,
                                           DType operands, const std::string& what);

  CudaBackend& be_;
  const Plan& plan_;
  const Graph& g_;
  std::byte* arena_;
  const BoundInputs& bound_;
  std::map<int, DeviceMemory> locals_;
  std::map<int, DeviceMemory> channels_last_;  // row-major values copied for a [B,C,H,W] kind
  std::vector<DeviceMemory> widened_;
  std::map<int, int> views_of_;  // an image attention's token views -> the value they alias
  // The value whose memory `v` is: itself, or what its token views lead to.
  int viewed(int v) const {
    for (auto view = views_of_.find(v); view != views_of_.end(); view = views_of_.find(v))
      v = view->second;
    return v;
  }
};

}  // namespace tp::compiled::cuda_impl
