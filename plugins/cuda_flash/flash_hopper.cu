// flash_hopper.cuh's kernel and its host side (flash_hopper.hpp). Built for sm_90a alone
// (wgmma, setmaxnreg and the TMA need the architecture-specific target), so no other device's
// code can hold an empty stand-in for it.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "flash_hopper.cu is built for sm_90a alone (CMakeLists.txt: cuda_flash_sm90a)"
#endif

#include "flash_hopper.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <type_traits>

#include "cuda_kernel.hpp"
#include "flash_hopper.cuh"

namespace sy::cuda::flash {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver the runtime loaded (CUDA 12.0's signature).
EncodeTiled encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                cudaEnableDefault, &found),
               "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (found != cudaDriverEntryPointSuccess || !f)
      throw sy::edge::StatusError(SY_STATUS_UNAVAILABLE,
                                  "flash_attention: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

template <typename T>
void encode(CUtensorMap* map, const void* base, const KvTensorShape& t) {
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r =
      encoder()(map,
                std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                          : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                4, const_cast<void*>(base), t.dims, t.strides, t.box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw sy::edge::StatusError(
        SY_STATUS_INTERNAL,
        "flash_attention: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ")");
}

}  // namespace

HopperMode hopper_mode(int sm_version) {
  const char* value = std::getenv("SWITCHYARD_CUDA_FLASH_SM90A");
  if (const auto mode = hopper_mode_of(value, sm_version)) return *mode;
  throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                              "SWITCHYARD_CUDA_FLASH_SM90A=" + std::string(value) +
                                  ": expected on, off, 1, 0 or no-pingpong");
}

template <typename T, int D>
int prepare_hopper() {
  const int smem = int(hopper_smem_bytes(D));
  check_cuda(cudaFuncSetAttribute(flash_hopper_kernel<T, D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
             "cudaFuncSetAttribute(flash_hopper_kernel)");
  int blocks = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, flash_hopper_kernel<T, D>,
                                                           kHopperThreads, smem),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor(flash_hopper_kernel)");
  return blocks;
}

template <typename T, int D>
void launch_hopper(const FlashParams& p, dim3 grid, bool pingpong, cudaStream_t stream) {
  HopperArgs args{};
  args.tma = hopper_tma(p);
  args.pingpong = pingpong;
  if (args.tma) {
    const KvTensorShape t = kv_tensor_shape(p, D);
    encode<T>(&args.k, p.k, t);
    encode<T>(&args.v, p.v, t);
  }
  flash_hopper_kernel<T, D><<<grid, kHopperThreads, hopper_smem_bytes(D), stream>>>(p, args);
  check_launch("flash_hopper_kernel");
}

#define SY_HOPPER_INSTANCE(T, D)       \
  template int prepare_hopper<T, D>(); \
  template void launch_hopper<T, D>(const FlashParams&, dim3, bool, cudaStream_t);
SY_HOPPER_INSTANCE(__half, 64)
SY_HOPPER_INSTANCE(__half, 128)
SY_HOPPER_INSTANCE(__nv_bfloat16, 64)
SY_HOPPER_INSTANCE(__nv_bfloat16, 128)
#undef SY_HOPPER_INSTANCE

}  // namespace sy::cuda::flash
