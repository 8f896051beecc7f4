// attention/ — the attention kernels: the contiguous blocks per tier (this header), decode
// tiles, the paged form (attention_paged.hpp), the fused decode block, the KV cache append and
// sinks_from_lse ops.
//
// The inner blocks of the CPU attention kernel, with one implementation per instruction set.
//
// The driver (attention.cpp) tiles the work: one item is `M` query rows (the query heads of one
// KV head, times a block of query positions) against the keys of one KV head, visited in blocks
// of at most kBlockKeys keys. Scores are kept TRANSPOSED, S[j][r] (key-major, one row of Mp
// floats per key), so the online softmax runs across rows r in full vectors and never reduces
// horizontally. Mp is M rounded up to a multiple of 16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tier/cpu_tier.hpp"

namespace sy::cpu {

// Keys per block, at most (the amx blocks': four steps of 32 keys on the tiles). The vector
// tiers take 48: even (bf16 pairs keys) and a multiple of 6 (the avx512 key tiles).
inline constexpr int kBlockKeys = 128;
inline constexpr int kVectorBlockKeys = 48;
inline constexpr int kRowAlign = 16;  // one zmm of f32

// What the online softmax of one key block needs.
struct SoftmaxBlock {
  float* s;  // [n][Mp] scores in, probabilities out
  int n, Mp;
  float scale;        // softmax scale applied to raw q·k
  float softcap;      // 0 = none
  bool masked;        // apply lo/hi; false when every key of the block is valid for every row
  int j0;             // absolute index of the block's first key
  const int32_t* lo;  // [Mp] first valid key per row (absolute)
  const int32_t* hi;  // [Mp] last valid key per row (absolute, inclusive)
  float* m;           // [Mp] running max, base-2 log domain
  float* l;           // [Mp] running sum
  float* alpha;       // [Mp] out: factor the running output must be scaled by
};

struct BlockKernels {
  const char* name;
  int block_keys;  // keys per block the driver hands over, at most kBlockKeys
  // Whether the driver asks the caches for the next block's K and V rows ahead of use. The amx
  // blocks read them in 16-row tile loads from L2 and ran 9 % slower with it (bench attention
  // bf16 prefill, Intel Xeon with AMX).
  bool prefetch_next;
  // Gathers M query rows (each `D` elements of the input dtype) into the layout `scores` reads.
  void (*pack_q)(const void* const* rows, int M, int Mp, int D, void* qt);
  // S[j][r] = q_r · k_j for the n keys starting at k0 (rows `k_stride` elements apart); rows
  // M..Mp-1 are padding and get finite values.
  void (*scores)(const void* qt, const void* k0, int64_t k_stride, int n, int M, int Mp, int D,
                 float* s);
  void (*softmax)(const SoftmaxBlock& b);
  // O[r] = O[r] · alpha[r] + Σ_j P[j][r] · v_j for r < M. `scratch` holds packed operands.
  void (*pv)(const float* p, const void* v0, int64_t v_stride, int n, int M, int Mp, int D,
             const float* alpha, float* o, void* scratch);
  // Bytes of `qt` and of pv's `scratch` for the given sizes.
  size_t (*qt_bytes)(int Mp, int D);
  size_t (*pv_scratch_bytes)(int Mp, int D);
};

// Decoding (at most kRowAlign query rows per KV head): one item walks every KV head of a key
// range together, kDecodeKeys keys at a time, so the rows of a key position for all heads —
// adjacent in the cache — are read as one stream. Scores are kept per key as one row of `lanes`
// floats holding every (head, query row) pair: s[j][h·R + r]. The softmax is the tier's
// SoftmaxBlock with Mp = lanes.
inline constexpr int kDecodeKeys = 16;

struct DecodeBlock {
  const float* q;      // [H][R][D] query rows widened to f32
  const void* k;       // the block's first key, head 0 (f32 or bf16, like the kernel's inputs)
  const void* v;       // the same for V
  int64_t stride;      // elements between consecutive keys of one head (Hkv · D)
  int n;               // keys in the block, at most kDecodeKeys
  int H, R, D;         // heads walked, query rows per head, head dim
  int lanes;           // length of a score row: >= H·R + 3, a multiple of kRowAlign
  float* s;            // [n][lanes]: scores out of `scores`, probabilities into `pv`
  const float* alpha;  // [lanes] factor the running output is scaled by (pv)
  float* o;            // [H][R][D] running output (pv)
  // Contiguous regions `scores` [0] and `pv` [1] ask the caches for, spread over their work in
  // address order (the caller passes the next block's K and V rows).
  const char* prefetch[2];
  int64_t prefetch_lines[2];
};

struct DecodeKernels {
  const char* name;
  // s[j][h·R + r] = q[h][r] · k_j[h]; lanes from H·R on may be overwritten.
  void (*scores)(const DecodeBlock& b);
  // o[h][r] = o[h][r] · alpha[h·R + r] + Σ_j s[j][h·R + r] · v_j[h].
  void (*pv)(const DecodeBlock& b);
  // 0: q and o in natural order. G > 0: within every G elements, the even ones and then the
  // odd ones (the order a bf16 load splits into without shuffles); G divides 16.
  int split_group;
};

const DecodeKernels& decode_kernels(const TierChoice& tier, bool bf16);
const DecodeKernels& generic_decode_kernels(bool bf16);
const DecodeKernels& avx2_decode_kernels(bool bf16);
const DecodeKernels& avx512_decode_kernels(bool bf16);

// The blocks of a tier (cpu_tier.hpp): amx (bf16 products on AMX tiles; f32 as avx512), avx512
// (bf16 only with AVX512-BF16, else the avx2 blocks), avx2 (bf16 widened to f32 in registers) or
// portable (any x86-64).
const BlockKernels& block_kernels(const TierChoice& tier, bool bf16);
// Per tier, defined in attention_generic.cpp / attention_avx2.cpp / attention_avx512.cpp.
const BlockKernels& generic_kernels(bool bf16);
const BlockKernels& avx2_block_kernels(bool bf16);
const BlockKernels& avx512_block_kernels(bool bf16);
const BlockKernels& amx_block_kernels(bool bf16);
// The amx bf16 products for keys that are not at one stride (the paged pool), in tiles of 16:
// tile t's 16 rows at keys[t] / vals[t], stride[t] elements apart. D % 32 == 0.
//   amx_scores_tiles: S^T [n rounded up to 16][Mp] (the amx blocks' layout); it reads all 16 rows
//   of every tile, past n too (whose scores the caller masks).
//   amx_pv_rows: o[r] = o[r]·alpha[r] + Σ_j P[r][j] v_j for r < M, P given as rows of bf16 key
//   pairs pr [Mp][kBlockKeys / 2] (finite, zero past n); it reads only the n keys' value rows.
//   scratch: the amx blocks' pv_scratch_bytes(Mp, D).
void amx_scores_tiles(const void* qt, const uint16_t* const* keys, const int64_t* stride, int n,
                      int Mp, int D, float* s);
void amx_pv_rows(const uint32_t* pr, const uint16_t* const* vals, const int64_t* stride, int n,
                 int M, int Mp, int D, const float* alpha, float* o, void* scratch);
// The avx512 bf16 packings the amx blocks share (attention_avx512.cpp): P^T f32 [n][Mp] to pairs
// of keys [(n+1)/2][Mp], and V rows to pairs of keys interleaved per column [(n+1)/2][D].
void avx512_pack_p_bf16(const float* p, int n, int Mp, uint32_t* out);
void avx512_pack_v_bf16(const uint16_t* v0, int64_t vs, int n, int D, uint32_t* out);

// Shared by both sets: the part of the online softmax that is not instruction-set specific.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

}  // namespace sy::cpu
