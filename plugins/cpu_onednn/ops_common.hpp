// Shared pieces of the plugin's decoder op kernels (ops_*.cpp): the scalar math
// (scalar_math.hpp) and row-parallel loops that skip OpenMP for tiny tensors.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "cpu_kernel.hpp"
#include "tier/scalar_math.hpp"

namespace sy::cpu {

// Below this much work (elements touched) a parallel region costs more than it saves:
// an empty OpenMP region is ~1.5-3 µs, a vectorised elementwise pass ~0.5 ns/element.
constexpr int64_t kParallelWork = 1 << 15;

// f(i) for i in [0, n), across ctx.num_threads when n·work_per_item is large enough.
// f must not throw.
template <typename F>
void parallel_for(const CpuContext& ctx, int64_t n, int64_t work_per_item, F&& f) {
  if (ctx.num_threads > 1 && n > 1 && n * work_per_item >= kParallelWork) {
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

// f(begin, end) over [0, n) in chunks, for flat elementwise loops.
template <typename F>
void parallel_chunks(const CpuContext& ctx, int64_t n, F&& f) {
  constexpr int64_t kChunk = 8192;
  int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(ctx, chunks, kChunk,
               [&](int64_t c) { f(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

inline int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

// A kernel templated on its element type, for the op's dtype (f32 or bf16).
template <template <typename> class K, typename... Args>
std::unique_ptr<CpuKernel> make_for_dtype(sy_dtype dtype, Args&&... args) {
  if (dtype == SY_DTYPE_BF16) return std::make_unique<K<bf16_bits>>(std::forward<Args>(args)...);
  return std::make_unique<K<float>>(std::forward<Args>(args)...);
}

}  // namespace sy::cpu
