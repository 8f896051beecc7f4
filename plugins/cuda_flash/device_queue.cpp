#include "device_queue.hpp"

#include "cuda_kernel.hpp"

namespace sy::cuda {

WorkCounts& thread_work() {
  thread_local WorkCounts counts;
  return counts;
}

DeviceQueue::DeviceQueue(int ordinal) : ordinal_(ordinal) {
  use_device(ordinal);
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaError_t e = cudaMalloc(&blas_workspace_, kBlasWorkspaceBytes);
  if (e != cudaSuccess) {
    cudaStreamDestroy(stream_);
    check_cuda(e, "cudaMalloc(cuBLAS workspace)");
  }
}

DeviceQueue::~DeviceQueue() {
  // Errors are dropped: the driver may already be going. The cuBLAS handle bound to the stream
  // is never used again (the plugin instance that owns both is being destroyed).
  if (cudaSetDevice(ordinal_) == cudaSuccess && cudaStreamSynchronize(stream_) == cudaSuccess) {
    cudaFree(blas_workspace_);
    cudaStreamDestroy(stream_);
  }
  cudaGetLastError();
}

void DeviceQueue::wait() {
  count_blocking_wait();
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void DeviceQueue::copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, stream_), "cudaMemcpyAsync");
  wait();
}

}  // namespace sy::cuda
