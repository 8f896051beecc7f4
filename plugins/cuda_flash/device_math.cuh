// Device helpers shared by the .cu files: f32/f16/bf16 loads and stores through f32 (bf16
// and f16 rounded to nearest even on store), warp and block reductions, dtype dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <string>

#include "cuda_kernel.hpp"

namespace sy::cuda {

__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide sum or max of one value per thread (blockDim.x a multiple of 32, <= 1024);
// every thread gets the result. `scratch` holds 32 floats.
template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  return kMax ? warp_max(r) : warp_sum(r);
}

// Calls f(T{}) with T the device type of a float dtype.
template <typename F>
void dispatch_float(sy_dtype d, F&& f) {
  switch (d) {
    case SY_DTYPE_F32: f(float{}); return;
    case SY_DTYPE_F16: f(__half{}); return;
    case SY_DTYPE_BF16: f(__nv_bfloat16{}); return;
    default:
      throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED,
                                  std::string("dtype ") +
                                      (sy_dtype_name(d) ? sy_dtype_name(d) : "?") +
                                      " is not f32, f16 or bf16");
  }
}

// Device memory a kernel owns from prepare to release (workspaces, flags).
class DeviceScratch {
 public:
  explicit DeviceScratch(size_t bytes) {
    check_cuda(cudaMalloc(&p_, bytes), "cudaMalloc(scratch)");
  }
  ~DeviceScratch() { cudaFree(p_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

inline unsigned grid_for(int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  return static_cast<unsigned>(g < 1 ? 1 : (g > (1 << 30) ? (1 << 30) : g));
}

}  // namespace sy::cuda
