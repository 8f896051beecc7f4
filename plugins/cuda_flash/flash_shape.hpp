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
// warp's): decode_warps(d) warps per block, each on its own tiles of kDecodeKeys keys. Every
// other call takes the rows kernel in one of two forms (RowsForm).
constexpr int kDecodeKeys = 16;
// 4 warps, but 2 at D = 256: four warps' buffers (140 KiB) would pass the 99 KiB a block may
// have on sm_86, sm_89 and sm_12x, and the op would fail there at prepare.
SY_FLASH_HD constexpr int decode_warps(int d) {
  return d > 128 ? 2 : 4;
}
constexpr bool flash_decode(long long packed_rows) {
  return packed_rows <= 16;
}

// A form of the rows kernel: warps of 16 packed rows per block, and K/V tile buffers. The wide
// form (128 rows, 3 stages) reads each tile once for twice the rows, and keeps a tile in flight
// beside the one in use; it needs 139 KiB of shared memory at D = 128, more than a block may
// have on sm_86, sm_89 and sm_120 (99 KiB), which take the narrow form (64 rows, 2 stages).
struct RowsForm {
  int warps, stages;
};
constexpr RowsForm kRowsWide{8, 3}, kRowsNarrow{4, 2};

// The form's stages at head dim d: D = 256 takes 2 (3 would pass the 163 KiB an sm_80 block
// may have).
constexpr int rows_stages(RowsForm f, int d) {
  return d > 128 ? 2 : f.stages;
}

// Shared memory per block of each kernel (16-bit elements, rows of d + 8 to spread the banks).
constexpr size_t rows_smem_bytes(RowsForm f, int d) {  // Q, then the K and V buffers
  return (size_t(16 * f.warps) + 2 * size_t(rows_stages(f, d)) * keys_per_tile(d)) * (d + 8) * 2;
}
constexpr size_t decode_smem_bytes(int d) {  // Q, then per warp K and V double-buffered (or the
  const size_t q = 16 * size_t(d + 8) * 2;   // warps' merge, which reuses them)
  const size_t tiles = size_t(decode_warps(d)) * 4 * kDecodeKeys * (d + 8) * 2;
  const size_t merge = size_t(decode_warps(d)) * 16 * (d + 2) * 4;
  return q + std::max(tiles, merge);
}

// The wide form where a block may have its shared memory (the device's opt-in limit), else the
// narrow one.
constexpr RowsForm rows_form(long long smem_per_block, int d) {
  return rows_smem_bytes(kRowsWide, d) <= size_t(smem_per_block) ? kRowsWide : kRowsNarrow;
}

// The sm_90a rows kernel (flash_hopper.cuh), where a device of sm_90 runs it: a producer
// warpgroup and two consumer warpgroups of 64 packed rows each (the wide form's 128 rows a
// block), tiles of 128 keys in 3 stages (a consumer releases a stage one tile late, as its
// O += P V runs beside the next tile's S, so a third keeps the producer a tile ahead), Q, K and
// V in 128-byte swizzled chunks of 64 dims: 225 KiB at D = 128, of an sm_90 block's 227.
constexpr int kHopperKeys = 128, kHopperStages = 3, kHopperThreads = 384;
static_assert(kHopperThreads == 32 * (kRowsWide.warps + 4),
              "two consumers of the wide form's rows");
SY_FLASH_HD constexpr bool hopper_head_dim(int d) {
  return d == 64 || d == 128;
}
// Q, or one stage of K or of V: 128 rows of d 16-bit elements.
SY_FLASH_HD constexpr size_t hopper_tile_bytes(int d) {
  return size_t(128) * d * 2;
}
// 1 KiB to align the swizzled buffers, Q, the stages of K and V, and the mbarriers.
constexpr size_t hopper_smem_bytes(int d) {
  return 1024 + hopper_tile_bytes(d) * (1 + 2 * kHopperStages) + 64;
}

// Resident blocks per multiprocessor of each kernel.
struct FlashOccupancy {
  int decode = 1, rows = 1;
};

// The most blocks of `threads` threads and `smem` bytes of shared memory a multiprocessor of
// `smem_per_sm` bytes holds by threads and shared memory alone (each block also takes 1 KiB):
// the occupancy API's answer or more, as registers may bind it lower.
constexpr int occupancy_bound(long long smem_per_sm, size_t smem, int threads) {
  const long long by_smem = smem_per_sm / (static_cast<long long>(smem) + 1024);
  return int(std::max(1LL, std::min<long long>(2048 / threads, by_smem)));
}

// What a device of an architecture offers a block and a multiprocessor (CUDA's tables: sm_80
// and sm_87 163 and 164 KiB, sm_86, sm_89 and sm_12x 99 and 100, sm_90 and sm_10x 227 and 228;
// another, the largest).
struct SmemLimits {
  long long per_block, per_sm;
};
constexpr SmemLimits smem_limits(int sm_version) {
  if (sm_version == 80 || sm_version == 87) return {163 * 1024, 164 * 1024};
  if (sm_version == 86 || sm_version == 89 || sm_version / 10 == 12) return {99 * 1024, 100 * 1024};
  return {227 * 1024, 228 * 1024};
}

// The form and occupancy a device of those limits allows, by shared memory and threads: what
// check assumes before any kernel exists; prepare asks the occupancy API and takes no more.
struct FlashLimits {
  RowsForm rows;
  FlashOccupancy occupancy;
  bool hopper = false;    // the rows calls take the sm_90a kernel (occupancy.rows is then its)
  bool pingpong = false;  // and its two consumers take turns
};
constexpr FlashLimits flash_limits(SmemLimits l, int d) {
  const RowsForm f = rows_form(l.per_block, d);
  return {f,
          {occupancy_bound(l.per_sm, decode_smem_bytes(d), 32 * decode_warps(d)),
           occupancy_bound(l.per_sm, rows_smem_bytes(f, d), 32 * f.warps)}};
}

// The limits with the sm_90a kernel taking the rows calls (an sm_90 device, whose rows form is
// the wide one: the same 128 rows a block): its occupancy by shared memory and threads, never
// more than the wide form's, which check declared the split-KV workspace by.
constexpr FlashLimits with_hopper(FlashLimits l, SmemLimits s, int d, bool pingpong) {
  l.hopper = true;
  l.pingpong = pingpong;
  l.occupancy.rows =
      std::min(l.occupancy.rows, occupancy_bound(s.per_sm, hopper_smem_bytes(d), kHopperThreads));
  return l;
}

// Splits the keys when the blocks without a split would not fill every multiprocessor with as
// many blocks as it holds of the kernel the call takes (FlashLimits' occupancy: the occupancy
// API's at prepare, the bound at check, so the workspace check declares is never short). Each
// split keeps at least 2 tiles per warp of a full cache. packed_rows = Sq × (Hq / Hkv).
inline int flash_splits(long long packed_rows, long long batch, long long kv_heads,
                        long long kv_len, int head_dim, int sm_count, const FlashLimits& limits) {
  const bool decode = flash_decode(packed_rows);
  const long long rows_per_block = 16LL * limits.rows.warps;
  const long long row_blocks = decode ? 1 : (packed_rows + rows_per_block - 1) / rows_per_block;
  const int blocks_per_sm = decode ? limits.occupancy.decode : limits.occupancy.rows;
  const long long want = static_cast<long long>(sm_count) * std::max(1, blocks_per_sm);
  const long long have = row_blocks * batch * kv_heads;
  if (have <= 0 || have >= want) return 1;
  const long long by_occupancy = (want + have - 1) / have;
  const long long min_keys =
      decode ? 2LL * decode_warps(head_dim) * kDecodeKeys : 4LL * keys_per_tile(head_dim);
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
