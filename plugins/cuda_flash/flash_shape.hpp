// How flash attention cuts the keys of one call (split-KV), and the workspace that takes: plain
// arithmetic shared by the launch (flash_kernel.cuh's launch_shape) and the plugin's check,
// which declares the workspace (ABI 1.4 workspace_bytes) before any kernel is prepared.
#pragma once

#include <algorithm>
#include <cstdint>

#ifdef __CUDACC__
#define SY_FLASH_HD __host__ __device__
#else
#define SY_FLASH_HD
#endif

namespace sy::cuda::flash {

// Keys per shared-memory tile: 64, but 32 for D = 256 so the output accumulators (D/2 floats
// per thread) and the scores fit in registers together.
SY_FLASH_HD constexpr int keys_per_tile(int d) {
  return d <= 128 ? 64 : 32;
}
constexpr int kMaxSplits = 64;

// Warps per block: one for at most 16 packed rows (decode), else four.
constexpr int flash_warps(long long packed_rows) {
  return packed_rows <= 16 ? 1 : 4;
}

// Splits the keys when the blocks without a split would not give every multiprocessor several
// warps to hide memory latency with; each split keeps at least 4 tiles of a full cache.
// packed_rows = Sq × (Hq / Hkv).
inline int flash_splits(long long packed_rows, long long batch, long long kv_heads,
                        long long kv_len, int head_dim, int sm_count) {
  const int warps = flash_warps(packed_rows);
  const long long row_blocks = (packed_rows + 16 * warps - 1) / (16 * warps);
  const long long want_warps = 8LL * sm_count;  // ~8 resident warps per multiprocessor
  const long long have_warps = row_blocks * batch * kv_heads * warps;
  if (have_warps <= 0 || have_warps >= want_warps) return 1;
  const long long by_occupancy = (want_warps + have_warps - 1) / have_warps;
  const long long by_length = std::max(1LL, kv_len / (4LL * keys_per_tile(head_dim)));
  return int(std::min<long long>({by_occupancy, by_length, kMaxSplits}));
}

// The keys a segment's paged attention shapes its split-KV for: the step's longest sequence
// rounded up to a power of two (at least 256), so that the launch shape, and a CUDA graph
// captured with it, serve every step of the bucket (the ranges are cut inside the kernel from
// each sequence's own length, so a split past a sequence's keys is empty).
inline long long kv_bucket(long long max_kv_len) {
  long long b = 256;
  while (b < max_kv_len) b *= 2;
  return b;
}

// The split-KV workspace: a normalised partial output and its LSE per split and query row.
inline uint64_t flash_workspace_bytes(long long batch, long long q_heads, long long q_len,
                                      int splits, int head_dim) {
  if (splits <= 1) return 0;
  return uint64_t(batch * q_heads * q_len) * uint64_t(splits) * uint64_t(head_dim + 1) *
         sizeof(float);
}

}  // namespace sy::cuda::flash
