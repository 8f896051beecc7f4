// Launchers of fused_kernels.cuh on a stream, by dtype (f32, f16, bf16; gemv: f16, bf16). Each
// counts its launch (check_launch). Throw StatusError.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "switchyard/plugin_api.h"

namespace sy::cuda {

namespace fused {
struct RopeAppendParams;
struct GemvParams;
}  // namespace fused

void launch_add_rms_norm(sy_dtype dtype, const void* a, const void* b, void* h, const void* w,
                         void* y, int64_t rows, int64_t hidden, float eps, float offset,
                         cudaStream_t stream);
void launch_rope_append(sy_dtype dtype, const fused::RopeAppendParams& p, cudaStream_t stream);
void launch_gemv(sy_dtype dtype, const fused::GemvParams& p, cudaStream_t stream);

}  // namespace sy::cuda
