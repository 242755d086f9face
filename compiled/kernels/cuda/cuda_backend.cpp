// The CUDA backend: arenas in device memory, weights uploaded once per session (in fp32 and,
// where a GEMM can take them exactly, in the activation dtype), and a plan run group by group
// with the same op sequence as the emulation (compiled/executor.cpp): values inside a group are
// fp32 device buffers, GEMMs go through cuBLAS with fp32 accumulation (f16 only under
// acc=f16), and each group output is rounded once into its arena buffer. Every CUDA and cuBLAS
// call is checked; inputs and read-backs go through one page-locked staging buffer, and the
// stream is synchronized only to read back (and after each group under TWINPATH_CUDA_SYNC=1);
// with CUDA graphs (the default) a plan's groups replay as one graph (captured_plans.h).
#include "compiled/kernels/cuda/cuda_backend.h"

#include <cuda_fp16.h>

namespace tp::compiled {
namespace cuda_impl {

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

PinnedStaging::~PinnedStaging() {
  if (last_use_) cudaEventDestroy(last_use_);
  if (p_) cudaFreeHost(p_);
}

Expected<std::byte*> PinnedStaging::acquire(int64_t bytes, const std::string& what) {
  if (last_use_) TP_CUDA(cudaEventSynchronize(last_use_), what);
  if (bytes > size_) {
    if (p_) TP_CUDA(cudaFreeHost(p_), what);
    p_ = nullptr;
    size_ = 0;
    void* p = nullptr;
    // Page-locked memory is host memory the OS cannot swap: refused like any other allocation.
    TP_CUDA(cudaMallocHost(&p, std::size_t(bytes)), what + " (page-locked staging)");
    p_ = static_cast<std::byte*>(p);
    size_ = bytes;
  }
  return p_;
}

Status PinnedStaging::mark_used(cudaStream_t stream, const std::string& what) {
  if (!last_use_) TP_CUDA(cudaEventCreateWithFlags(&last_use_, cudaEventDisableTiming), what);
  TP_CUDA(cudaEventRecord(last_use_, stream), what);
  return Status();
}

Expected<const DeviceParam*> CudaBackend::param(const std::shared_ptr<const PreparedParam>& p,
                                                Storage operand) {
  DeviceParam& d = params_[p.get()];
  d.host = p;
  DeviceMemory& slot = d.values[std::size_t(operand)];
  if (!slot.get()) {
    const std::string what = "uploading " + p->key + " to the GPU";
    Tensor values = Tensor::uninitialized(DType::kF32, {p->count()});
    std::memcpy(values.raw(), ParamFloats(*p).data(), values.nbytes());
    if (operand != Storage::kF32) values = values.to(dtype_of(operand));  // exact: see operand_for
    TP_ASSIGN_OR_RETURN(slot, scratch(int64_t(values.nbytes()), what));
    // On the backend's stream: the slot may be a block the pool freed there while kernels still
    // read it (a copy on the legacy stream would not wait for them). A pageable source is staged
    // before the call returns, so `values` may go out of scope.
    TP_CUDA(
        cudaMemcpyAsync(slot.get(), values.raw(), values.nbytes(), cudaMemcpyHostToDevice, stream_),
        what);
  }
  if (!p->scales.empty() && !d.scales.get()) {
    const std::string what = "uploading " + p->key + "'s fp8 scales to the GPU";
    TP_ASSIGN_OR_RETURN(d.scales, scratch(int64_t(p->scales.size() * sizeof(float)), what));
    TP_CUDA(cudaMemcpyAsync(d.scales.get(), p->scales.data(), p->scales.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_),
            what);
  }
  return &d;
}

Status CudaBackend::gemm(const void* a, const void* b, Storage operand, int64_t m, int64_t n,
                         int64_t k, bool b_transposed, bool f16_accumulation, float* out,
                         int64_t ldc, int64_t lda, int64_t ldb) {
  const cudaDataType_t t = blas_type(operand);
  if (ldc == 0) ldc = n;
  if (lda == 0) lda = k;
  if (ldb == 0) ldb = b_transposed ? k : n;
  if (f16_accumulation && ldc != n) return Error("an f16-accumulation GEMM into strided rows");
  // cuBLAS is column-major: row-major C[m][n] is column-major C^T [n][m], so compute C^T = B' A^T.
  const cublasOperation_t op_b = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!f16_accumulation) {
    const float one = 1.0f, zero = 0.0f;
    TP_BLAS(cublasGemmEx(blas_, op_b, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, t, int(ldb), a,
                         t, int(lda), &zero, out, CUDA_R_32F, int(ldc), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (fp32 accumulation)");
    return Status();
  }
  // acc=f16: cuBLAS's f16 compute type needs an f16 output, widened after.
  TP_ASSIGN_OR_RETURN(DeviceMemory tmp, scratch(m * n * 2, "an f16-accumulation GEMM output"));
  const __half one = __float2half(1.0f), zero = __float2half(0.0f);
  TP_BLAS(cublasGemmEx(blas_, op_b, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, t, int(ldb), a, t,
                       int(lda), &zero, tmp.get(), CUDA_R_16F, int(n), CUBLAS_COMPUTE_16F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx (f16 accumulation)");
  TP_CUDA(cuda::widen(Src{tmp.get(), Storage::kF16}, m * n, out, stream_),
          "widening an f16-accumulation GEMM output");
  return Status();
}

// `t` rounded once into its buffer's dtype (on the host, as the contract says: nearest even),
// then through the page-locked staging buffer into the arena in the plan's layout: channels-last
// by a transpose on the device (the rounded values go through fp32 and back, exactly), unless
// TWINPATH_CUDA_HOST_TRANSPOSE=1 keeps the host transpose of the first GPU run.
Status CudaBackend::upload(const Plan& plan, std::byte* arena, int value, const Tensor& t) {
  const Buffer& b = plan.buffers.at(value);
  const std::string what =
      "uploading " + plan.graph->value_names[std::size_t(value)] + " to the GPU";
  const int64_t bytes = t.numel() * int64_t(dtype_size(b.dtype));
  if (plan.row_major || host_transposes()) {
    TP_ASSIGN_OR_RETURN(std::byte * staged, staging_.acquire(bytes, what));
    stage_input(plan, t, b.dtype, staged);
    TP_CUDA(cudaMemcpyAsync(arena + b.offset, staged, std::size_t(bytes), cudaMemcpyHostToDevice,
                            stream_),
            what);
    return staging_.mark_used(stream_, what);
  }
  TP_ASSIGN_OR_RETURN(Storage storage, storage_of(b.dtype));
  const Tensor rounded = t.to(b.dtype);
  const Shape& s = rounded.shape();
  const int64_t plane = s[2] * s[3];
  TP_ASSIGN_OR_RETURN(DeviceMemory nchw, scratch(bytes, what));
  TP_ASSIGN_OR_RETURN(DeviceMemory last, scratch(rounded.numel() * 4, what));
  TP_ASSIGN_OR_RETURN(std::byte * staged, staging_.acquire(bytes, what));
  std::memcpy(staged, rounded.raw(), std::size_t(bytes));
  TP_CUDA(cudaMemcpyAsync(nchw.get(), staged, std::size_t(bytes), cudaMemcpyHostToDevice, stream_),
          what);
  TP_RETURN_IF_ERROR(staging_.mark_used(stream_, what));
  TP_CUDA(cuda::transpose_channels(Src{nchw.get(), storage}, s[0], s[1], plane, true,
                                   last.get<float>(), stream_),
          what);
  TP_CUDA(
      cuda::store_rounded(last.get<float>(), rounded.numel(), storage, arena + b.offset, stream_),
      what);
  return Status();
}

// Back through the staging buffer: NHWC -> NCHW on the device (exactly), or on the host under
// TWINPATH_CUDA_HOST_TRANSPOSE=1.
Expected<Tensor> CudaBackend::read(const Plan& plan, const std::byte* arena, int value,
                                   const Shape& shape) {
  const Buffer& b = plan.buffers.at(value);
  const std::string what =
      "reading " + plan.graph->value_names[std::size_t(value)] + " back from the GPU";
  Tensor out = Tensor::uninitialized(b.dtype, shape);
  const void* src = arena + b.offset;
  DeviceMemory last, nchw;
  const bool device_transpose = !plan.row_major && !host_transposes();
  if (device_transpose) {
    TP_ASSIGN_OR_RETURN(Storage storage, storage_of(b.dtype));
    TP_ASSIGN_OR_RETURN(last, scratch(out.numel() * 4, what));
    TP_ASSIGN_OR_RETURN(nchw, scratch(int64_t(out.nbytes()), what));
    TP_CUDA(cuda::transpose_channels(Src{src, storage}, shape[0], shape[1], shape[2] * shape[3],
                                     false, last.get<float>(), stream_),
            what);
    TP_CUDA(cuda::store_rounded(last.get<float>(), out.numel(), storage, nchw.get(), stream_),
            what);
    src = nchw.get();
  }
  TP_ASSIGN_OR_RETURN(std::byte * staged, staging_.acquire(int64_t(out.nbytes()), what));
  TP_CUDA(cudaMemcpyAsync(staged, src, std::size_t(out.nbytes()), cudaMemcpyDeviceToHost, stream_),
          what);
  TP_RETURN_IF_ERROR(staging_.mark_used(stream_, what));
  TP_CUDA(cudaStreamSynchronize(stream_), what);
  if (plan.row_major || device_transpose)
    std::memcpy(out.raw(), staged, std::size_t(out.nbytes()));
  else
    transpose_channels(staged, out.raw(), shape, dtype_size(b.dtype), false);
  return out;
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
  if (time_groups_ && !observe) return execute_timed(plan, arena, bound);
  // A graph replays the groups alone: an observer reads values back between them, and
  // TWINPATH_CUDA_SYNC=1 synchronizes there, which a capture cannot hold.
  if (captured_ && !observe && !sync_each_group())
    return captured_->run(plan, arena, bound, stream_, [&]() -> Status {
      GroupRun run(*this, plan, arena, bound);
      for (const Group& grp : plan.groups) TP_RETURN_IF_ERROR(run.run(grp));
      return Status();
    });
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

Status CudaBackend::execute_timed(const Plan& plan, std::byte* arena, const BoundInputs& bound) {
  const std::string what = "timing the groups of " + plan.key;
  std::vector<cudaEvent_t> events(plan.groups.size() + 1, nullptr);
  auto destroy = [&] {
    for (cudaEvent_t e : events)
      if (e) cudaEventDestroy(e);
  };
  Status s = [&]() -> Status {
    for (cudaEvent_t& e : events) TP_CUDA(cudaEventCreate(&e), what);
    GroupRun run(*this, plan, arena, bound);
    TP_CUDA(cudaEventRecord(events[0], stream_), what);
    for (std::size_t i = 0; i < plan.groups.size(); ++i) {
      TP_RETURN_IF_ERROR(run.run(plan.groups[i]));
      TP_CUDA(cudaEventRecord(events[i + 1], stream_), what);
    }
    TP_CUDA(cudaEventSynchronize(events.back()), what);
    GroupTimes& t = group_times_[plan.key];
    t.milliseconds.resize(plan.groups.size());
    for (std::size_t i = 0; i < plan.groups.size(); ++i) {
      float ms = 0;
      TP_CUDA(cudaEventElapsedTime(&ms, events[i], events[i + 1]), what);
      t.milliseconds[i] += ms;
    }
    ++t.runs;
    return Status();
  }();
  destroy();
  return s;
}

}  // namespace cuda_impl

Expected<std::unique_ptr<Backend>> make_cuda_backend(CudaKernels kernels, bool graphs) {
  if (cuda_device_count() == 0)
    return Error(
        "compiled:cuda: no CUDA device is visible on this machine; run on a machine with an NVIDIA "
        "GPU, or use "
        "compiled:cpu, which runs the same plans under the same numerics contract");
  auto backend = std::make_unique<cuda_impl::CudaBackend>(kernels, graphs);
  TP_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tp::compiled
