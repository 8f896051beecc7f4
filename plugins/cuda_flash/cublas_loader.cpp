#include "cublas_loader.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "cuda_kernel.hpp"
#include "device_queue.hpp"

namespace sy::cuda {

Cublas::~Cublas() {
  // Handles are not destroyed at shutdown: the driver may already be tearing down, and
  // cublasDestroy then fails or hangs; the process exit releases them. The library stays
  // loaded for the same reason.
}

std::string Cublas::load() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (tried_) return error_;
  tried_ = true;
  std::string why;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    lib_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib_) break;
    const char* e = ::dlerror();
    why += std::string(why.empty() ? "" : "; ") + (e ? e : name);
  }
  if (!lib_) return error_ = "cuBLAS could not be loaded (libcublas.so.13, .so.12, .so): " + why;
  auto sym = [&](const char* name) -> void* {
    void* p = ::dlsym(lib_, name);
    if (!p) {
      const char* e = ::dlerror();
      error_ += std::string(error_.empty() ? "" : "; ") + "cuBLAS lacks " + name + " (" +
                (e ? e : "dlsym failed") + ")";
    }
    return p;
  };
  create_ = reinterpret_cast<decltype(create_)>(sym("cublasCreate_v2"));
  destroy_ = reinterpret_cast<decltype(destroy_)>(sym("cublasDestroy_v2"));
  gemm_ = reinterpret_cast<decltype(gemm_)>(sym("cublasGemmEx"));
  set_stream_ = reinterpret_cast<decltype(set_stream_)>(sym("cublasSetStream_v2"));
  set_workspace_ = reinterpret_cast<decltype(set_workspace_)>(sym("cublasSetWorkspace_v2"));
  return error_;
}

cublasHandle_t Cublas::handle(DeviceQueue& queue) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int ordinal = queue.ordinal();
  if (!create_ || ordinal < 0 || ordinal >= kMaxDevices)
    throw sy::edge::StatusError(SY_STATUS_INTERNAL, "cuBLAS is not loaded for this device");
  if (!handles_[ordinal]) {
    use_device(ordinal);
    cublasHandle_t h = nullptr;
    cublasStatus_t s = create_(&h);
    if (s == CUBLAS_STATUS_SUCCESS) s = set_stream_(h, queue.stream());
    if (s == CUBLAS_STATUS_SUCCESS)
      s = set_workspace_(h, queue.blas_workspace(), DeviceQueue::kBlasWorkspaceBytes);
    if (s != CUBLAS_STATUS_SUCCESS)
      throw sy::edge::StatusError(
          s == CUBLAS_STATUS_ALLOC_FAILED ? SY_STATUS_OUT_OF_MEMORY : SY_STATUS_UNAVAILABLE,
          "cuBLAS handle set-up returned status " + std::to_string(int(s)));
    handles_[ordinal] = h;
  }
  return handles_[ordinal];
}

}  // namespace sy::cuda
