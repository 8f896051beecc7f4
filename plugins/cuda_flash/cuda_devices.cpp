#include "cuda_devices.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace sy::cuda {
namespace {

std::string cuda_error(const char* call, cudaError_t e) {
  return std::string(call) + " returned " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
         ")";
}

// The runtime's error for a missing driver is "insufficient driver"; say what is missing.
std::string driver_probe() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    return std::string("CUDA driver not found (") + (why ? why : "libcuda.so.1 not loadable") + ")";
  }
  ::dlclose(h);
  return "";
}

}  // namespace

int sm_version(const char* arch) {
  int v = 0;
  if (!arch || std::strncmp(arch, "sm_", 3) != 0 || std::sscanf(arch + 3, "%d", &v) != 1) return 0;
  return v;
}

Discovery discover_devices() {
  Discovery out;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    std::string driver = driver_probe();
    out.no_devices_reason = driver.empty() ? cuda_error("cudaGetDeviceCount", e)
                                           : driver + "; " + cuda_error("cudaGetDeviceCount", e);
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    e = cudaGetDeviceProperties(&prop, i);
    if (e != cudaSuccess) {
      out.no_devices_reason = cuda_error("cudaGetDeviceProperties", e);
      continue;
    }
    CudaDevice d;
    d.name = prop.name;
    d.sm_major = prop.major;
    d.sm_minor = prop.minor;
    d.arch = "sm_" + std::to_string(prop.major * 10 + prop.minor);
    d.memory_bytes = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    d.ordinal = i;
    out.devices.push_back(d);
  }
  if (out.devices.empty() && out.no_devices_reason.empty())
    out.no_devices_reason = "no CUDA device present (cudaGetDeviceCount returned 0)";
  return out;
}

}  // namespace sy::cuda
