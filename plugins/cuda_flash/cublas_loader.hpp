// cuBLAS loaded lazily with dlopen on the first matmul prepare: the plugin never links it,
// so it loads (and serves every other kernel) on a machine without cuBLAS. Only the header's
// declarations are used; every entry point is resolved with dlsym.
#pragma once

#include <cublas_api.h>

#include <mutex>
#include <string>

namespace sy::cuda {

class DeviceQueue;

class Cublas {
 public:
  // cublasGemmEx's C signature (the header adds a C++ overload, so decltype cannot name it).
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void*, const void*, cudaDataType, int,
                                      const void*, cudaDataType, int, const void*, void*,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  Cublas() = default;
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  ~Cublas();
  // Loads the library once (thread-safe); returns "" or why it cannot be used, naming the
  // library and dlerror.
  std::string load();
  // The handle for the queue's device, created on first use (a cuBLAS handle belongs to the
  // device current at creation) and bound to the queue's stream and workspace, so its calls
  // run in the queue's order and can be captured. Throws StatusError.
  cublasHandle_t handle(DeviceQueue& queue);
  GemmExFn gemm() const { return gemm_; }

 private:
  static constexpr int kMaxDevices = 64;
  std::mutex mutex_;
  bool tried_ = false;
  std::string error_;
  void* lib_ = nullptr;
  decltype(&cublasCreate_v2) create_ = nullptr;
  decltype(&cublasDestroy_v2) destroy_ = nullptr;
  decltype(&cublasSetStream_v2) set_stream_ = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace_ = nullptr;
  GemmExFn gemm_ = nullptr;
  cublasHandle_t handles_[kMaxDevices] = {};
};

}  // namespace sy::cuda
