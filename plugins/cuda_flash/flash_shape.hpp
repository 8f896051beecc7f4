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

// The decode kernel (flash_kernel.cuh) takes a call whose blocks have at most 16 packed rows (one
// warp's): kDecodeWarps warps per block, each on its own tiles of kDecodeKeys keys. Every other
// call takes the rows kernel: 4 warps of 16 rows, tiles of keys_per_tile keys.
constexpr int kDecodeWarps = 4, kDecodeKeys = 16;
constexpr bool flash_decode(long long packed_rows) {
  return packed_rows <= 16;
}
// Both kernels run 128 threads a block, and a multiprocessor holds at most 2048 threads: no
// occupancy is above 16 blocks.
constexpr int kMaxBlocksPerSm = 16;

// Splits the keys when the blocks without a split would not fill every multiprocessor with as
// many blocks as it can hold (blocks_per_sm: the occupancy API's answer for the kernel the call
// takes, at prepare; the check, before any kernel exists, passes kMaxBlocksPerSm, so the
// workspace it declares is never short). Each split keeps at least 2 tiles per warp of a full
// cache. packed_rows = Sq × (Hq / Hkv).
inline int flash_splits(long long packed_rows, long long batch, long long kv_heads,
                        long long kv_len, int head_dim, int sm_count, int blocks_per_sm) {
  const bool decode = flash_decode(packed_rows);
  const long long row_blocks = decode ? 1 : (packed_rows + 63) / 64;
  const long long want = static_cast<long long>(sm_count) * std::max(1, blocks_per_sm);
  const long long have = row_blocks * batch * kv_heads;
  if (have <= 0 || have >= want) return 1;
  const long long by_occupancy = (want + have - 1) / have;
  const long long min_keys =
      decode ? 2LL * kDecodeWarps * kDecodeKeys : 4LL * keys_per_tile(head_dim);
  const long long by_length = std::max(1LL, kv_len / min_keys);
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
