#include <cuda_runtime_api.h>

#include <string>

#include "cuda_kernel.hpp"

namespace sy::cuda {

void check_cuda(int code, const char* call) {
  auto e = static_cast<cudaError_t>(code);
  if (e == cudaSuccess) return;
  sy_status s = e == cudaErrorMemoryAllocation ? SY_STATUS_OUT_OF_MEMORY : SY_STATUS_INTERNAL;
  throw sy::edge::StatusError(s, std::string(call) + " returned " + cudaGetErrorName(e) + " (" +
                                     cudaGetErrorString(e) + ")");
}

void check_launch(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
  // Synchronous first form: the host sees a kernel's fault in the call that launched it.
  check_cuda(cudaDeviceSynchronize(), kernel);
}

void use_device(int ordinal) {
  check_cuda(cudaSetDevice(ordinal), "cudaSetDevice");
}

}  // namespace sy::cuda
