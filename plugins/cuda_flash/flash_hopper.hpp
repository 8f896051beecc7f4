// The host side of the sm_90a flash kernel (flash_hopper.cuh), whose translation unit
// (flash_hopper.cu) is built for sm_90a alone: flash_attention.cu reaches it through these, and
// only for a device of sm_90, head dim 64 or 128, with SWITCHYARD_CUDA_FLASH_SM90A=on.
#pragma once

#include <cuda_runtime_api.h>

namespace sy::cuda::flash {

struct FlashParams;

// Whether the kernel takes the rows calls on a device of sm_<sm_version>: sm_90, and
// SWITCHYARD_CUDA_FLASH_SM90A "on" (or "1"), read at prepare. Off by default until a device
// check has run the kernel on an sm_90 part (docs/cuda_flash.md).
bool hopper_on(int sm_version);

// Opts flash_hopper_kernel<T, D> in to its shared memory on the current device and returns its
// resident blocks per multiprocessor (the occupancy API). Throws StatusError.
template <typename T, int D>
int prepare_hopper();

// Launches it over `grid` on `stream`: K and V by TMA where hopper_tma(p) (the tensor maps are
// encoded here, through the driver entry point the runtime hands out, so nothing links the
// driver), else by cp.async. Throws StatusError.
template <typename T, int D>
void launch_hopper(const FlashParams& p, dim3 grid, cudaStream_t stream);

}  // namespace sy::cuda::flash
