#include <cuda_runtime_api.h>

#include <string>

#include "cuda_kernel.hpp"
#include "device_queue.hpp"

namespace sy::cuda {

void check_cuda(int code, const char* call) {
  auto e = static_cast<cudaError_t>(code);
  if (e == cudaSuccess) return;
  sy_status s = e == cudaErrorMemoryAllocation ? SY_STATUS_OUT_OF_MEMORY : SY_STATUS_INTERNAL;
  throw sy::edge::StatusError(s, std::string(call) + " returned " + cudaGetErrorName(e) + " (" +
                                     cudaGetErrorString(e) + ")");
}

void check_launch(const char* kernel) {
  // The launch itself only: the kernel runs on, in stream order, and a fault of its own
  // surfaces at the next copy or synchronize (ABI 1.2 execute semantics, plugin_api.h).
  ++thread_work().launches;
  check_cuda(cudaGetLastError(), kernel);
}

void read_back(const CudaContext& ctx, void* dst, const void* src, size_t bytes) {
  ctx.queue->copy(dst, src, bytes, cudaMemcpyDeviceToHost);
}

void CudaKernel::run(const DLTensor* const* inputs, const DLTensor* const* outputs) {
  std::lock_guard<std::mutex> lock(ctx_.queue->mutex());
  use_device(ctx_.ordinal);
  launch(inputs, outputs, nullptr);
}

cudaStream_t CudaKernel::stream() const {
  return ctx_.queue->stream();
}

void use_device(int ordinal) {
  check_cuda(cudaSetDevice(ordinal), "cudaSetDevice");
}

}  // namespace sy::cuda
