// The flash attention kernels of cuda_flash, and the choice of their launch shape: the
// FlashAttention-2 algorithm on tensor cores (mma.sync m16n8k16, f16 or bf16 operands, f32
// accumulation), sm_80 and newer. docs/operators.md §Attention semantics is the contract;
// docs/cuda_flash.md explains the choices. flash_attention.cu launches them.
//
// Rows are packed as FlashAttention's pack-GQA does: the block for (batch b, KV head hk)
// serves every query head of that group, packed row R = i*G + g (query position i, head g of
// the group), so each K/V tile is read from memory once per group, and a decode step (Sq = 1)
// still fills a 16-row MMA with G heads. Each warp owns 16 packed rows; K/V tiles of BN keys
// are double-buffered in shared memory with cp.async (zero-filled past the valid length, so
// a stale cache tail can never turn 0 x NaN into NaN). Scores are kept in the log2 domain
// (exp2f).
//
// Split-KV: when (row blocks x B x Hkv) would leave the GPU idle — decode above all — the keys
// are cut into `splits` ranges, each block writes a normalised partial output and its LSE to
// a workspace, and `combine_splits` merges them by LSE (the sinks join there, once).
//
// This header is also compiled by the host compiler under SY_CUDA_EMULATION, with the test's
// model of the few PTX instructions, so the kernels' logic is tested on machines without a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "device_math.cuh"
#include "flash_shape.hpp"

#ifdef SY_CUDA_EMULATION
#define SY_DYNAMIC_SHARED(name) unsigned char* name = sy_emu::dynamic_shared()
#else
#define SY_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

namespace sy::cuda::flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct FlashParams {
  const void *q, *k, *v;
  const float* sinks;     // [Hq] or null
  const int64_t* kv_len;  // [B] in device memory, or null
  // The paged form (ABI 1.5, FlashAttention's varlen with a block table): B = 1 and Sq = T, the
  // step's tokens of every sequence packed; grid.y runs over S sequences × Hkv. Sequence s has
  // the queries [query_start[s], query_start[s + 1]) of q, the last ones of its seq_lens[s]
  // keys; key j of it is row j % BS of pool block block_table[s·MB + j / BS] (k and v are the
  // pools [NB, BS, Hkv, D]). Null query_start: the contiguous form.
  const int32_t* query_start;
  const int32_t* seq_lens;
  const int32_t* block_table;
  int S, MB, BS;
  void* o;
  float* lse;                     // [B, Hq, Sq] or null
  float* part_o;                  // splits > 1: [splits, B*Hq*Sq, D], normalised per split
  float* part_lse;                // splits > 1: [splits, B*Hq*Sq]
  int B, Sq, Skv, Hq, Hkv, G, M;  // G = Hq/Hkv, M = Sq*G packed rows per (b, hk)
  int splits;                     // key ranges per (row block, b, hk); 1: no split
  float scale, softcap;
  int causal, window;  // window < 0: none
};

// ---- PTX wrappers (sm_80: cp.async, ldmatrix, mma.sync bf16) ------------------------------
// Under SY_CUDA_EMULATION (tests/backends/cuda_flash_emulation_test.cpp) each wrapper calls the
// test's model of the instruction instead, so this file's index arithmetic runs on a CPU.

#ifndef SY_CUDA_EMULATION
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#endif

// 16 bytes global -> shared, asynchronously; `ok` false writes 16 zero bytes instead.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool ok) {
#ifdef SY_CUDA_EMULATION
  sy_emu::cp_async16(dst, src, ok);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(ok ? 16 : 0));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifndef SY_CUDA_EMULATION
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifndef SY_CUDA_EMULATION
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Four 8x8 matrices of 16-bit values; lanes 8m..8m+7 give the row addresses of matrix m.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
#ifdef SY_CUDA_EMULATION
  sy_emu::ldmatrix_x4(r, p, false);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
#ifdef SY_CUDA_EMULATION
  sy_emu::ldmatrix_x4(r, p, true);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

// c += a (16x16, row) * b (16x8, col), f32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#ifdef SY_CUDA_EMULATION
  sy_emu::mma_m16n8k16<T>(c, a, b0, b1);
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Two floats as one register of two 16-bit values, `lo` in the low half (the lower column).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&r, &h, 4);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&r, &h, 4);
  }
  return r;
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ---- the kernel ---------------------------------------------------------------------------

template <typename T, int D, int NW>
constexpr size_t flash_smem_bytes() {
  constexpr int LD = D + 8, BN = keys_per_tile(D);
  return (size_t(16 * NW) + 4 * BN) * LD * sizeof(T);  // Q, then K and V double-buffered
}

// Where one thread's two rows (gid and gid + 8 of its warp's 16) stand.
struct RowPair {
  int packed[2];  // R
  int diag[2];    // i + Skv_valid - Sq: the last key a causal row sees
  bool live[2];   // R < M
};

template <typename T, int D, int NW>
__global__ void __launch_bounds__(NW * 32) flash_mma_kernel(const FlashParams p) {
  constexpr int BN = keys_per_tile(D), BM = 16 * NW, LD = D + 8, CH = D / 8;
  constexpr int NT = BN / 8;  // score fragments (8 keys each) per tile
  constexpr int NO = D / 8;   // output fragments (8 dims each)
  SY_DYNAMIC_SHARED(smem);
  T* qs = reinterpret_cast<T*>(smem);  // [BM][LD]
  T* ks = qs + BM * LD;                // [2][BN][LD]
  T* vs = ks + 2 * BN * LD;            // [2][BN][LD]

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  // Heaviest causal row blocks first, so the short ones fill the tail.
  const int R0 = (gridDim.x - 1 - blockIdx.x) * BM;
  const int hk = blockIdx.y % p.Hkv, split = blockIdx.z;
  // This block's sequence: contiguous, batch b with Sq queries from row b·Sq of q; paged,
  // sequence s with q_len queries from token `first` (b = 0: q, o and lse are one batch of T).
  const bool paged = p.query_start != nullptr;
  const int seq = blockIdx.y / p.Hkv, b = paged ? 0 : seq;
  const int first = paged ? p.query_start[seq] : 0;
  const int q_len = paged ? p.query_start[seq + 1] - first : p.Sq;
  const int M = q_len * p.G;  // this sequence's packed rows
  if (R0 >= M) return;        // rows of a shorter sequence than the grid's longest (block-uniform)
  const int32_t* table = paged ? p.block_table + size_t(seq) * p.MB : nullptr;

  int L = p.Skv;
  if (paged) {
    L = p.seq_lens[seq];
  } else if (p.kv_len) {
    long long x = p.kv_len[b];
    L = x < 0 ? 0 : (x > p.Skv ? p.Skv : int(x));
  }
  const int shift = L - q_len;

  // Keys any row of the block may see, [lo, hi), then this split's share of those tiles: cut
  // from the block's own range, not the cache's capacity, so a half-full cache or a window
  // still spreads over every split.
  const int i_first = R0 / p.G, i_last = (min(R0 + BM, M) - 1) / p.G;
  int lo = 0, hi = L;
  if (p.causal) hi = min(hi, i_last + shift + 1);
  if (p.window >= 0) lo = max(0, i_first + shift - p.window);
  if (p.splits > 1) {
    const int t_lo = lo / BN, t_hi = hi > lo ? (hi + BN - 1) / BN : t_lo;
    const int per = (t_hi - t_lo + p.splits - 1) / p.splits;
    lo = max(lo, (t_lo + split * per) * BN);
    hi = min(hi, (t_lo + (split + 1) * per) * BN);
  }
  const int t_begin = lo / BN, t_end = hi > lo ? (hi + BN - 1) / BN : t_begin;

  for (int idx = threadIdx.x; idx < BM * CH; idx += NW * 32) {
    const int r = idx / CH, c = idx % CH, R = R0 + r;
    const bool ok = R < M;
    const T* src = q;
    if (ok)
      src = q + ((size_t(b) * p.Sq + first + R / p.G) * p.Hq + hk * p.G + R % p.G) * D + c * 8;
    cp_async16(qs + r * LD + c * 8, src, ok);
  }
  // Key j's row of KV head hk: in the batch's cache, or in the block the table names.
  auto key_row = [&](int j) -> size_t {
    if (paged) return (size_t(table[j / p.BS]) * p.BS + j % p.BS) * p.Hkv + hk;
    return (size_t(b) * p.Skv + j) * p.Hkv + hk;
  };
  auto load_tile = [&](int t, int stage) {
    for (int idx = threadIdx.x; idx < BN * CH; idx += NW * 32) {
      const int r = idx / CH, c = idx % CH, j = t * BN + r;
      const bool ok = j < L;
      const size_t off = ok ? key_row(j) * D + c * 8 : 0;
      cp_async16(ks + (stage * BN + r) * LD + c * 8, k + off, ok);
      cp_async16(vs + (stage * BN + r) * LD + c * 8, v + off, ok);
    }
  };
  if (t_end > t_begin) load_tile(t_begin, 0);
  cp_async_commit();  // group: Q and the first tile

  RowPair rows;
  const int wrow0 = R0 + warp * 16;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    rows.packed[h] = wrow0 + gid + 8 * h;
    rows.live[h] = rows.packed[h] < M;
    rows.diag[h] = rows.packed[h] / p.G + shift;
  }
  const bool warp_live = wrow0 < M, warp_full = wrow0 + 15 < M;
  const int w_i_lo = wrow0 / p.G, w_i_hi = (min(wrow0 + 15, M - 1)) / p.G;

  float acc[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int t = t_begin; t < t_end; ++t) {
    const int stage = (t - t_begin) & 1;
    if (t + 1 < t_end) load_tile(t + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just requested has landed
    __syncthreads();
    const int j0 = t * BN;
    const T* kt = ks + stage * BN * LD;
    const T* vt = vs + stage * BN * LD;
    if (warp_live) {
      // S = Q K^T for this warp's 16 rows.
      float s[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t a[4];
        ldsm_x4(a, qs + (warp * 16 + (lane & 15)) * LD + kc * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int n = 0; n < NT; n += 2) {
          uint32_t bk[4];  // keys n*8.. and n*8+8.., dims kc*16 .. +16
          ldsm_x4(bk, kt + (n * 8 + (lane & 7) + (lane >> 4) * 8) * LD + kc * 16 +
                          ((lane >> 3) & 1) * 8);
          mma16816<T>(s[n], a, bk[0], bk[1]);
          mma16816<T>(s[n + 1], a, bk[2], bk[3]);
        }
      }
      // Scale, softcap and mask, in the log2 domain. Masking is skipped for tiles every row
      // of the warp sees whole (warp-uniform).
      const bool whole = warp_full && j0 + BN <= L &&
                         (!p.causal || j0 + BN - 1 <= w_i_lo + shift) &&
                         (p.window < 0 || j0 >= w_i_hi + shift - p.window);
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[n][e] * p.scale;
          if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
          x *= kLog2e;
          if (!whole) {
            const int h = e >> 1, j = j0 + n * 8 + tig * 2 + (e & 1);
            const bool ok = rows.live[h] && j < L && (!p.causal || j <= rows.diag[h]) &&
                            (p.window < 0 || j >= rows.diag[h] - p.window);
            if (!ok) x = -INFINITY;
          }
          s[n][e] = x;
        }
      // Online softmax per row; the four lanes of a quad share a row.
      float corr[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
        const float m_new = fmaxf(m2[h], quad_max(mx));
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no valid key yet: p = 0
        corr[h] = exp2f(m2[h] - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          s[n][2 * h] = exp2f(s[n][2 * h] - m_use);
          s[n][2 * h + 1] = exp2f(s[n][2 * h + 1] - m_use);
          sum += s[n][2 * h] + s[n][2 * h + 1];
        }
        l[h] = l[h] * corr[h] + sum;  // this lane's share; the quad is summed at the end
        m2[h] = m_new;
      }
#pragma unroll
      for (int n = 0; n < NO; ++n) {
        acc[n][0] *= corr[0];
        acc[n][1] *= corr[0];
        acc[n][2] *= corr[1];
        acc[n][3] *= corr[1];
      }
      // O += P V: two score fragments (16 keys) form one A fragment.
#pragma unroll
      for (int kt16 = 0; kt16 < BN / 16; ++kt16) {
        uint32_t a[4] = {pack2<T>(s[2 * kt16][0], s[2 * kt16][1]),
                         pack2<T>(s[2 * kt16][2], s[2 * kt16][3]),
                         pack2<T>(s[2 * kt16 + 1][0], s[2 * kt16 + 1][1]),
                         pack2<T>(s[2 * kt16 + 1][2], s[2 * kt16 + 1][3])};
#pragma unroll
        for (int n = 0; n < NO; n += 2) {
          uint32_t bv[4];  // keys kt16*16 .. +16, dims n*8 .. n*8+16, transposed
          ldsm_x4_trans(bv, vt + (kt16 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 +
                                (lane >> 4) * 8);
          mma16816<T>(acc[n], a, bv[0], bv[1]);
          mma16816<T>(acc[n + 1], a, bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // this stage is consumed before the next iteration refills it
  }
  cp_async_wait<0>();

  // Epilogue: a row with no valid key gives o = 0 and lse = -inf.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l_row = quad_sum(l[h]);
    if (!rows.live[h]) continue;
    const int R = rows.packed[h], i = first + R / p.G, head = hk * p.G + R % p.G;
    const bool any = m2[h] != -INFINITY;
    const float lse = any ? m2[h] * kLn2 + logf(l_row) : -INFINITY;
    const size_t row = (size_t(b) * p.Hq + head) * p.Sq + i;
    if (p.splits == 1) {
      float denom = l_row;
      if (any && p.sinks) denom += exp2f(p.sinks[head] * kLog2e - m2[h]);  // once, no value row
      const float inv = any ? 1.0f / denom : 0.0f;
      T* orow = static_cast<T*>(p.o) + ((size_t(b) * p.Sq + i) * p.Hq + head) * D;
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *reinterpret_cast<uint32_t*>(orow + n * 8 + tig * 2) =
            pack2<T>(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
      if (p.lse && tig == 0) p.lse[row] = lse;
    } else {
      const float inv = any ? 1.0f / l_row : 0.0f;
      const size_t rows_total = size_t(p.B) * p.Hq * p.Sq;
      float* orow = p.part_o + (size_t(split) * rows_total + row) * D;
#pragma unroll
      for (int n = 0; n < NO; ++n)
        *reinterpret_cast<float2*>(orow + n * 8 + tig * 2) =
            make_float2(acc[n][2 * h] * inv, acc[n][2 * h + 1] * inv);
      if (tig == 0) p.part_lse[size_t(split) * rows_total + row] = lse;
    }
  }
}

// Merges the splits of one (b, head, i) row per warp: o = Σ e^{lse_s} o_s / (e^{lse} + e^{sink}),
// lse = log Σ e^{lse_s} (the sink is never part of the LSE output).
template <typename T, int D>
__global__ void __launch_bounds__(128) combine_splits(const FlashParams p) {
  const size_t rows_total = size_t(p.B) * p.Hq * p.Sq;
  const size_t row = size_t(blockIdx.x) * 4 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows_total) return;
  const int i = int(row % p.Sq), head = int((row / p.Sq) % p.Hq), b = int(row / p.Sq / p.Hq);
  float mx = -INFINITY;
  for (int s = 0; s < p.splits; ++s) mx = fmaxf(mx, p.part_lse[s * rows_total + row]);
  float acc[D / 32] = {}, total = 0.0f;
  if (mx != -INFINITY) {
    for (int s = 0; s < p.splits; ++s) {
      const float ls = p.part_lse[s * rows_total + row];
      if (ls == -INFINITY) continue;
      const float w = expf(ls - mx);
      total += w;
      const float* src = p.part_o + (s * rows_total + row) * D;
#pragma unroll
      for (int t = 0; t < D / 32; ++t) acc[t] = fmaf(w, src[lane + 32 * t], acc[t]);
    }
  }
  const bool any = mx != -INFINITY;
  float denom = total;
  if (any && p.sinks) denom += expf(p.sinks[head] - mx);
  const float inv = any ? 1.0f / denom : 0.0f;
  T* orow = static_cast<T*>(p.o) + ((size_t(b) * p.Sq + i) * p.Hq + head) * D;
#pragma unroll
  for (int t = 0; t < D / 32; ++t) orow[lane + 32 * t] = from_f32<T>(acc[t] * inv);
  if (p.lse && lane == 0) p.lse[row] = any ? mx + logf(total) : -INFINITY;
}

// ---- launch configuration (host)
// -----------------------------------------------------------------

struct LaunchShape {
  int warps = 4;  // 1 when a block's packed rows fit one warp (decode)
  int row_blocks = 1;
  int splits = 1;
  size_t smem = 0;
};

template <typename T, int D>
size_t smem_for(int warps) {
  return warps == 1 ? flash_smem_bytes<T, D, 1>() : flash_smem_bytes<T, D, 4>();
}

// The block shape of one call and its split of the keys (flash_shape.hpp). Paged: p.M is the
// longest sequence's packed rows, p.Skv its most keys, and the grid's y runs over p.S sequences.
template <typename T, int D>
LaunchShape launch_shape(const FlashParams& p, int sm_count) {
  LaunchShape s;
  s.warps = flash_warps(p.M);
  s.row_blocks = std::max(1, (p.M + 16 * s.warps - 1) / (16 * s.warps));
  s.smem = smem_for<T, D>(s.warps);
  s.splits = flash_splits(p.M, p.query_start ? p.S : p.B, p.Hkv, p.Skv, D, sm_count);
  return s;
}

}  // namespace sy::cuda::flash
