#include "fused_ops.hpp"

#include <algorithm>

#include "fused_kernels.cuh"

namespace sy::cuda {

void launch_add_rms_norm(sy_dtype dtype, const void* a, const void* b, void* h, const void* w,
                         void* y, int64_t rows, int64_t hidden, float eps, float offset,
                         cudaStream_t stream) {
  if (rows <= 0) return;
  if (rows > 0x7fffffff)
    throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT, "more than 2^31 rows in one call");
  dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    fused::add_rms_norm_kernel<T><<<unsigned(rows), 256, 0, stream>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(h),
        static_cast<const T*>(w), static_cast<T*>(y), hidden, eps, offset);
  });
  check_launch("add_rms_norm_kernel");
}

void launch_rope_append(sy_dtype dtype, const fused::RopeAppendParams& p, cudaStream_t stream) {
  int64_t most = 0;
  for (int j = 0; j < p.num_jobs; ++j)
    most = std::max(most, p.tokens * p.jobs[j].heads * fused::rope_items(p, p.jobs[j]));
  if (most == 0) return;
  const dim3 grid(grid_for(most, 256), unsigned(p.num_jobs));
  dispatch_float(dtype, [&](auto tag) {
    using T = decltype(tag);
    fused::rope_append_kernel<T><<<grid, 256, 0, stream>>>(p);
  });
  check_launch("rope_append_kernel");
}

void launch_gemv(sy_dtype dtype, const fused::GemvParams& p, cudaStream_t stream) {
  int columns = 0;
  if (p.gate != fused::Gate::kNone)
    columns = p.n[0];
  else
    for (int j = 0; j < p.num_jobs; ++j) columns += p.n[j];
  if (columns == 0 || p.m == 0) return;
  const unsigned blocks = unsigned((columns + fused::kGemvWarps - 1) / fused::kGemvWarps);
  if (dtype == SY_DTYPE_F16)
    fused::gemv_kernel<__half><<<blocks, fused::kGemvWarps * 32, 0, stream>>>(p);
  else if (dtype == SY_DTYPE_BF16)
    fused::gemv_kernel<__nv_bfloat16><<<blocks, fused::kGemvWarps * 32, 0, stream>>>(p);
  else
    throw sy::edge::StatusError(SY_STATUS_INTERNAL, "gemv takes f16 or bf16");
  check_launch("gemv_kernel");
}

}  // namespace sy::cuda
