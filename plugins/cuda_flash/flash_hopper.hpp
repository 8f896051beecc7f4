// The host side of the sm_90a flash kernel (flash_hopper.cuh), whose translation unit
// (flash_hopper.cu) is built for sm_90a alone: flash_attention.cu reaches it through these, and
// only for a device of sm_90, head dim 64 or 128, with SWITCHYARD_CUDA_FLASH_SM90A set.
#pragma once

#include <cuda_runtime_api.h>

#include <optional>
#include <string_view>

namespace sy::cuda::flash {

struct FlashParams;

// Whether the kernel takes the rows calls, and how its consumers are scheduled.
enum class HopperMode {
  off,       // the sm_80 kernels
  pingpong,  // the two consumers take turns (FlashAttention-3's schedule at these head dims)
  free,      // they issue their products freely, for a device check to compare
};

// The mode a value of SWITCHYARD_CUDA_FLASH_SM90A (null: unset) names on a device of
// sm_<sm_version>: unset, "off" or "0": off; "on" or "1": pingpong; "no-pingpong": free; off
// on any device but sm_90 whatever the value. nullopt for any other value. Off by default until
// a device check has run the kernel on an sm_90 part (docs/cuda_flash.md).
inline std::optional<HopperMode> hopper_mode_of(const char* value, int sm_version) {
  const std::string_view v = value ? value : "";
  HopperMode mode = HopperMode::off;
  if (v == "on" || v == "1")
    mode = HopperMode::pingpong;
  else if (v == "no-pingpong")
    mode = HopperMode::free;
  else if (!v.empty() && v != "off" && v != "0")
    return std::nullopt;
  return sm_version == 90 ? mode : HopperMode::off;
}

// hopper_mode_of the variable, read at prepare. Throws StatusError (INVALID_ARGUMENT, naming
// the variable and the value) on a value it does not know.
HopperMode hopper_mode(int sm_version);

// Opts flash_hopper_kernel<T, D> in to its shared memory on the current device and returns its
// resident blocks per multiprocessor (the occupancy API). Throws StatusError.
template <typename T, int D>
int prepare_hopper();

// Launches it over `grid` on `stream`: K and V by TMA where hopper_tma(p) (the tensor maps are
// encoded here, through the driver entry point the runtime hands out, so nothing links the
// driver), else by cp.async. Throws StatusError.
template <typename T, int D>
void launch_hopper(const FlashParams& p, dim3 grid, bool pingpong, cudaStream_t stream);

}  // namespace sy::cuda::flash
