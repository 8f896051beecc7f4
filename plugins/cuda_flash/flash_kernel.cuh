// The flash attention kernels of cuda_flash, and the choice of their launch shape: the
// FlashAttention-2 algorithm on tensor cores (mma.sync m16n8k16, f16 or bf16 operands, f32
// accumulation), sm_80 and newer. docs/operators.md §Attention semantics is the contract;
// docs/cuda_flash.md explains the choices. flash_attention.cu launches them.
//
// Rows are packed as FlashAttention's pack-GQA does: the block for (batch b, KV head hk)
// serves every query head of that group, packed row R = i*G + g (query position i, head g of
// the group), so each K/V tile is read from memory once per group, and a decode step (Sq = 1)
// still fills a 16-row MMA with G heads. In the rows kernel each warp owns 16 packed rows; in
// the decode kernel (at most 16 packed rows) every warp shares them and takes its own keys, and
// the warps merge at the end. K/V tiles are double-buffered in shared memory with cp.async
// (zero-filled past the valid length, so a stale cache tail can never turn 0 x NaN into NaN).
// Scores are kept in the log2 domain (exp2f).
//
// Split-KV: when (row blocks x B x Hkv) would not fill every multiprocessor with the blocks the
// occupancy API says it can hold — decode above all — the keys are cut into `splits` ranges,
// each block writes a normalised partial output and its LSE to a workspace, and
// `combine_splits` merges them by LSE (the sinks join there, once).
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

// A shared-memory address in the shared window (the emulation's model of it).
#ifndef SY_CUDA_EMULATION
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#else
inline unsigned smem_addr(const void* p) {
  return sy_emu::shared_window(p);
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

// ---- pieces both kernels share --------------------------------------------------------------

// One block's sequence: contiguous, batch b with Sq queries from row b·Sq of q; paged, sequence
// s with q_len queries from token `first` (b = 0: q, o and lse are one batch of T). M: its
// packed rows; L: its keys; shift: L − q_len (query i's last causal key is i + shift).
struct BlockSeq {
  bool paged;
  int b, first, q_len, M, L, shift;
  const int32_t* table;  // paged: this sequence's row of the block table
};

__device__ __forceinline__ BlockSeq block_seq(const FlashParams& p, int seq) {
  BlockSeq s;
  s.paged = p.query_start != nullptr;
  s.b = s.paged ? 0 : seq;
  s.first = s.paged ? p.query_start[seq] : 0;
  s.q_len = s.paged ? p.query_start[seq + 1] - s.first : p.Sq;
  s.M = s.q_len * p.G;
  s.table = s.paged ? p.block_table + size_t(seq) * p.MB : nullptr;
  s.L = p.Skv;
  if (s.paged) {
    s.L = p.seq_lens[seq];
  } else if (p.kv_len) {
    long long x = p.kv_len[s.b];
    s.L = x < 0 ? 0 : (x > p.Skv ? p.Skv : int(x));
  }
  s.shift = s.L - s.q_len;
  return s;
}

// The tiles of BN keys that packed rows [R0, R0 + BM) may see, [t_begin, t_end), cut to this
// split's share: cut from the rows' own key range, not the cache's capacity, so a half-full
// cache or a window still spreads over every split.
__device__ __forceinline__ void split_tiles(const FlashParams& p, const BlockSeq& s, int R0, int BM,
                                            int BN, int split, int& t_begin, int& t_end) {
  const int i_first = R0 / p.G, i_last = (min(R0 + BM, s.M) - 1) / p.G;
  int lo = 0, hi = s.L;
  if (p.causal) hi = min(hi, i_last + s.shift + 1);
  if (p.window >= 0) lo = max(0, i_first + s.shift - p.window);
  if (p.splits > 1) {
    const int t_lo = lo / BN, t_hi = hi > lo ? (hi + BN - 1) / BN : t_lo;
    const int per = (t_hi - t_lo + p.splits - 1) / p.splits;
    lo = max(lo, (t_lo + split * per) * BN);
    hi = min(hi, (t_lo + (split + 1) * per) * BN);
  }
  t_begin = lo / BN;
  t_end = hi > lo ? (hi + BN - 1) / BN : t_begin;
}

// Key j's row of KV head hk (in units of D elements): in batch b's cache, or in pool block
// `page` (the block table's entry for j).
__device__ __forceinline__ size_t kv_row(const FlashParams& p, const BlockSeq& s, int page, int hk,
                                         int j) {
  if (s.paged) return (size_t(page) * p.BS + j % p.BS) * p.Hkv + hk;
  return (size_t(s.b) * p.Skv + j) * p.Hkv + hk;
}

// The block's Q rows [R0, R0 + rows) into qs ([rows][D + 8]), zeros past the sequence's rows.
template <typename T, int D>
__device__ __forceinline__ void load_q(const FlashParams& p, const BlockSeq& s, int hk, int R0,
                                       int rows, T* qs) {
  constexpr int LD = D + 8, CH = D / 8;
  const T* q = static_cast<const T*>(p.q);
  for (int idx = threadIdx.x; idx < rows * CH; idx += blockDim.x) {
    const int r = idx / CH, c = idx % CH, R = R0 + r;
    const bool ok = R < s.M;
    const T* src = q;
    if (ok)
      src = q + ((size_t(s.b) * p.Sq + s.first + R / p.G) * p.Hq + hk * p.G + R % p.G) * D + c * 8;
    cp_async16(qs + r * LD + c * 8, src, ok);
  }
}

// Where one thread's two rows (gid and gid + 8 of its warp's 16) stand.
struct RowPair {
  int packed[2];  // R
  int diag[2];    // i + Skv_valid - Sq: the last key a causal row sees
  bool live[2];   // R < M
};

// A warp's 16 packed rows from w0: the thread's two, and the extent of the sixteen, for knowing
// which tiles every row sees whole.
struct WarpRows {
  RowPair rows;
  bool live, full;  // any row, every row within the sequence
  int i_lo, i_hi;   // the rows' first and last query
};

__device__ __forceinline__ WarpRows warp_rows(const FlashParams& p, const BlockSeq& s, int w0,
                                              int gid) {
  WarpRows w;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    w.rows.packed[h] = w0 + gid + 8 * h;
    w.rows.live[h] = w.rows.packed[h] < s.M;
    w.rows.diag[h] = w.rows.packed[h] / p.G + s.shift;
  }
  w.live = w0 < s.M;
  w.full = w0 + 15 < s.M;
  w.i_lo = w0 / p.G;
  w.i_hi = min(w0 + 15, s.M - 1) / p.G;
  return w;
}

// Whether every row of the warp sees keys [j0, j0 + BN) whole, so the tile needs no mask
// (warp-uniform).
__device__ __forceinline__ bool tile_whole(const FlashParams& p, const BlockSeq& s,
                                           const WarpRows& w, int j0, int BN) {
  return w.full && j0 + BN <= s.L && (!p.causal || j0 + BN - 1 <= w.i_lo + s.shift) &&
         (p.window < 0 || j0 >= w.i_hi + s.shift - p.window);
}

// The products of dims kc·16 .. +16 of a warp's 16 rows (a: their A fragment) with a tile of
// NT·8 keys (kt: [NT·8][D + 8]), added to s.
template <typename T, int D, int NT>
__device__ __forceinline__ void qk_step(float (&s)[NT][4], const uint32_t (&a)[4], const T* kt,
                                        int kc, int lane) {
  constexpr int LD = D + 8;
#pragma unroll
  for (int n = 0; n < NT; n += 2) {
    uint32_t bk[4];  // keys n*8.. and n*8+8.., dims kc*16 .. +16
    ldsm_x4(bk, kt + (n * 8 + (lane & 7) + (lane >> 4) * 8) * LD + kc * 16 + ((lane >> 3) & 1) * 8);
    mma16816<T>(s[n], a, bk[0], bk[1]);
    mma16816<T>(s[n + 1], a, bk[2], bk[3]);
  }
}

// S = Q Kᵀ for a warp's 16 rows (qw: the first of them, [16][D + 8]) against a tile of NT·8 keys
// (kt: [NT·8][D + 8]).
template <typename T, int D, int NT>
__device__ __forceinline__ void qk_scores(float (&s)[NT][4], const T* qw, const T* kt, int lane) {
#pragma unroll
  for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t a[4];
    ldsm_x4(a, qw + (lane & 15) * (D + 8) + kc * 16 + (lane >> 4) * 8);
    qk_step<T, D, NT>(s, a, kt, kc, lane);
  }
}

// The same from Q fragments held in registers (load_q_fragments).
template <typename T, int D, int NT>
__device__ __forceinline__ void qk_scores(float (&s)[NT][4], const uint32_t (&qf)[D / 16][4],
                                          const T* kt, int lane) {
#pragma unroll
  for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) qk_step<T, D, NT>(s, qf[kc], kt, kc, lane);
}

// Scale, softcap and mask of a tile's scores from key j0, into the log2 domain. Masking is
// skipped for a tile every row of the warp sees whole.
template <int NT>
__device__ __forceinline__ void log2_scores(float (&s)[NT][4], const FlashParams& p,
                                            const BlockSeq& seq, const RowPair& rows, int j0,
                                            bool whole, int tig) {
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = s[n][e] * p.scale;
      if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
      x *= kLog2e;
      if (!whole) {
        const int h = e >> 1, j = j0 + n * 8 + tig * 2 + (e & 1);
        const bool ok = rows.live[h] && j < seq.L && (!p.causal || j <= rows.diag[h]) &&
                        (p.window < 0 || j >= rows.diag[h] - p.window);
        if (!ok) x = -INFINITY;
      }
      s[n][e] = x;
    }
}

// The online softmax's step over one tile per row (the four lanes of a quad share a row): the
// scores become P, the running max m2 (log2 domain) and this lane's share of the sum l move on,
// and corr is the factor the output accumulators must take to the new max.
template <int NT>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float (&m2)[2], float (&l)[2],
                                             float (&corr)[2]) {
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
}

template <int NO>
__device__ __forceinline__ void rescale(float (&acc)[NO][4], const float (&corr)[2]) {
#pragma unroll
  for (int n = 0; n < NO; ++n) {
    acc[n][0] *= corr[0];
    acc[n][1] *= corr[0];
    acc[n][2] *= corr[1];
    acc[n][3] *= corr[1];
  }
}

// Both at once, where the accumulators are free to take the factor at once.
template <int NT, int NO>
__device__ __forceinline__ void online_softmax(float (&s)[NT][4], float (&m2)[2], float (&l)[2],
                                               float (&acc)[NO][4]) {
  float corr[2];
  softmax_tile<NT>(s, m2, l, corr);
  rescale<NO>(acc, corr);
}

// P of keys 16 k16 .. +16 as an A fragment of m16n8k16 (and of wgmma from registers): two score
// fragments form one.
template <typename T, int NT>
__device__ __forceinline__ void p_fragment(uint32_t (&a)[4], const float (&s)[NT][4], int k16) {
  a[0] = pack2<T>(s[2 * k16][0], s[2 * k16][1]);
  a[1] = pack2<T>(s[2 * k16][2], s[2 * k16][3]);
  a[2] = pack2<T>(s[2 * k16 + 1][0], s[2 * k16 + 1][1]);
  a[3] = pack2<T>(s[2 * k16 + 1][2], s[2 * k16 + 1][3]);
}

// O += P V for a tile of NT·8 keys (vt: [NT·8][D + 8]).
template <typename T, int D, int NT>
__device__ __forceinline__ void pv_accumulate(float (&acc)[D / 8][4], const float (&s)[NT][4],
                                              const T* vt, int lane) {
  constexpr int LD = D + 8, NO = D / 8;
#pragma unroll
  for (int kt16 = 0; kt16 < NT / 2; ++kt16) {
    uint32_t a[4];
    p_fragment<T, NT>(a, s, kt16);
#pragma unroll
    for (int n = 0; n < NO; n += 2) {
      uint32_t bv[4];  // keys kt16*16 .. +16, dims n*8 .. n*8+16, transposed
      ldsm_x4_trans(
          bv, vt + (kt16 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + n * 8 + (lane >> 4) * 8);
      mma16816<T>(acc[n], a, bv[0], bv[1]);
      mma16816<T>(acc[n + 1], a, bv[2], bv[3]);
    }
  }
}

// A finished row: o = acc · inv, and its LSE (natural log). Without a split the sink joins the
// denominator here, once, as a key with no value row; with splits, combine_splits adds it. A row
// with no valid key gives o = 0 and lse = −inf.
struct RowEnd {
  float inv, lse;
};

__device__ __forceinline__ RowEnd row_end(const FlashParams& p, float m2, float l, int head) {
  const bool any = m2 != -INFINITY;
  float denom = l;
  if (p.splits == 1 && any && p.sinks) denom += exp2f(p.sinks[head] * kLog2e - m2);
  return {any ? 1.0f / denom : 0.0f, any ? m2 * kLn2 + logf(l) : -INFINITY};
}

// Columns col and col + 1 of row (b, i, head)'s output: into o, or this split's partial (f32).
template <typename T, int D>
__device__ __forceinline__ void store_pair(const FlashParams& p, int split, int b, int i, int head,
                                           int col, float x0, float x1) {
  if (p.splits == 1) {
    T* orow = static_cast<T*>(p.o) + ((size_t(b) * p.Sq + i) * p.Hq + head) * D;
    *reinterpret_cast<uint32_t*>(orow + col) = pack2<T>(x0, x1);
    return;
  }
  const size_t rows_total = size_t(p.B) * p.Hq * p.Sq, row = (size_t(b) * p.Hq + head) * p.Sq + i;
  *reinterpret_cast<float2*>(p.part_o + (size_t(split) * rows_total + row) * D + col) =
      make_float2(x0, x1);
}

__device__ __forceinline__ void store_lse(const FlashParams& p, int split, int b, int i, int head,
                                          float lse) {
  const size_t row = (size_t(b) * p.Hq + head) * p.Sq + i;
  if (p.splits == 1) {
    if (p.lse) p.lse[row] = lse;
    return;
  }
  p.part_lse[size_t(split) * size_t(p.B) * p.Hq * p.Sq + row] = lse;
}

// A warp's finished rows (its thread's two): each row's sum over its quad, its end, and its
// output and LSE where the row is live.
template <typename T, int D>
__device__ __forceinline__ void store_rows(const FlashParams& p, const BlockSeq& seq,
                                           const RowPair& rows, int hk, int split,
                                           const float (&m2)[2], const float (&l)[2],
                                           const float (&acc)[D / 8][4], int tig) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l_row = quad_sum(l[h]);
    if (!rows.live[h]) continue;
    const int R = rows.packed[h], i = seq.first + R / p.G, head = hk * p.G + R % p.G;
    const RowEnd e = row_end(p, m2[h], l_row, head);
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      store_pair<T, D>(p, split, seq.b, i, head, n * 8 + tig * 2, acc[n][2 * h] * e.inv,
                       acc[n][2 * h + 1] * e.inv);
    if (tig == 0) store_lse(p, split, seq.b, i, head, e.lse);
  }
}

// ---- the rows kernel: warps of 16 packed rows each (prefill, and decode of many heads) ------
// A block of NW · 16 packed rows (RowsForm: 128 where shared memory allows, else 64) reads each
// K/V tile once for all of them. Each warp holds its Q fragments in registers (D <= 128; at
// D = 256 they would crowd the 128 output accumulators out, so Q is read from shared memory each
// tile there). Tiles flow through ST buffers: a tile is requested ST − 1 tiles ahead, into the
// buffer the tile before this one used, which every warp has left once it passes this tile's
// barrier, so one barrier a tile suffices.

// A warp's Q fragments for S = Q Kᵀ: kc-th 16 dims of its 16 rows (qw: [16][D + 8]).
template <typename T, int D>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[D / 16][4], const T* qw, int lane) {
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc)
    ldsm_x4(qf[kc], qw + (lane & 15) * (D + 8) + kc * 16 + (lane >> 4) * 8);
}

template <typename T, int D, int NW, int ST>
__global__ void __launch_bounds__(NW * 32) flash_mma_kernel(const FlashParams p) {
  constexpr int BN = keys_per_tile(D), BM = 16 * NW, LD = D + 8, CH = D / 8;
  constexpr int NT = BN / 8;  // score fragments (8 keys each) per tile
  constexpr int NO = D / 8;   // output fragments (8 dims each)
  constexpr bool kQInRegisters = D <= 128;
  static_assert(sizeof(T) == 2, "flash_shape.hpp's shared memory sizes are of 16-bit elements");
  SY_DYNAMIC_SHARED(smem);
  T* qs = reinterpret_cast<T*>(smem);  // [BM][LD]
  T* ks = qs + BM * LD;                // [ST][BN][LD]
  T* vs = ks + ST * BN * LD;           // [ST][BN][LD]

  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  // Heaviest causal row blocks first, so the short ones fill the tail.
  const int R0 = (gridDim.x - 1 - blockIdx.x) * BM;
  const int hk = blockIdx.y % p.Hkv, split = blockIdx.z;
  const BlockSeq seq = block_seq(p, blockIdx.y / p.Hkv);
  if (R0 >= seq.M) return;  // rows of a shorter sequence than the grid's longest (block-uniform)
  int t_begin, t_end;
  split_tiles(p, seq, R0, BM, BN, split, t_begin, t_end);

  load_q<T, D>(p, seq, hk, R0, BM, qs);
  auto load_tile = [&](int t, int stage) {
    for (int idx = threadIdx.x; idx < BN * CH; idx += NW * 32) {
      const int r = idx / CH, c = idx % CH, j = t * BN + r;
      const bool ok = j < seq.L;
      const size_t off =
          ok ? kv_row(p, seq, seq.paged ? seq.table[j / p.BS] : 0, hk, j) * D + c * 8 : 0;
      cp_async16(ks + (stage * BN + r) * LD + c * 8, k + off, ok);
      cp_async16(vs + (stage * BN + r) * LD + c * 8, v + off, ok);
    }
  };
  // Groups: Q with the first tile, then one per tile (empty past the last, so that the count of
  // groups in flight stays the same on every iteration).
#pragma unroll
  for (int i = 0; i < ST - 1; ++i) {
    if (t_begin + i < t_end) load_tile(t_begin + i, i);
    cp_async_commit();
  }

  const WarpRows wr = warp_rows(p, seq, R0 + warp * 16, gid);
  const T* qw = qs + warp * 16 * LD;
  uint32_t qf[kQInRegisters ? D / 16 : 1][4];
  float acc[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int t = t_begin; t < t_end; ++t) {
    const int i = t - t_begin, stage = i % ST;
    cp_async_wait<ST - 2>();  // tile t (and Q) landed for this thread
    __syncthreads();          // for every thread; and every warp is done with tile t − 1
    if (t + ST - 1 < t_end) load_tile(t + ST - 1, (i + ST - 1) % ST);
    cp_async_commit();
    if (!wr.live) continue;
    float s[NT][4];
    if constexpr (kQInRegisters) {
      if (i == 0) load_q_fragments<T, D>(qf, qw, lane);
      qk_scores<T, D, NT>(s, qf, ks + stage * BN * LD, lane);
    } else {
      qk_scores<T, D, NT>(s, qw, ks + stage * BN * LD, lane);
    }
    log2_scores<NT>(s, p, seq, wr.rows, t * BN, tile_whole(p, seq, wr, t * BN, BN), tig);
    online_softmax<NT, NO>(s, m2, l, acc);
    pv_accumulate<T, D, NT>(acc, s, vs + stage * BN * LD, lane);
  }
  cp_async_wait<0>();

  store_rows<T, D>(p, seq, wr.rows, hk, split, m2, l, acc, tig);
}

// ---- the decode kernel: every warp on the same 16 packed rows, each on its own keys ---------
// A decode step has at most 16 packed rows per (sequence, KV head): one warp's worth. A block of
// decode_warps(D) warps serves them together, warp w taking key tiles w, w + warps, … of the
// block's range with its own double-buffered stage and its own online softmax, so four times
// the loads are in flight per block, and a small tile (kDecodeKeys) keeps a block's shared
// memory at the rows kernel's. Each lane holds the pool block of one key of the warp's next
// tile, read a tile ahead, and the loads take it by shuffle: no block-table read waits in front
// of a tile's loads. At the end the warps' partial rows merge by their maxima in shared memory.

template <typename T, int D>
__global__ void __launch_bounds__(decode_warps(D) * 32) flash_decode_kernel(const FlashParams p) {
  constexpr int NW = decode_warps(D), BN = kDecodeKeys, LD = D + 8, CH = D / 8;
  constexpr int NT = BN / 8, NO = D / 8;
  static_assert(sizeof(T) == 2, "flash_shape.hpp's shared memory sizes are of 16-bit elements");
  SY_DYNAMIC_SHARED(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  T* qs = reinterpret_cast<T*>(smem);         // [16][LD]
  T* ks = qs + 16 * LD + warp * 4 * BN * LD;  // this warp's [2][BN][LD]
  T* vs = ks + 2 * BN * LD;                   // [2][BN][LD]
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const int hk = blockIdx.y % p.Hkv, split = blockIdx.z;
  const BlockSeq seq = block_seq(p, blockIdx.y / p.Hkv);
  if (seq.M <= 0) return;  // a sequence without queries this step (block-uniform)
  int t_begin, t_end;
  split_tiles(p, seq, 0, 16, BN, split, t_begin, t_end);
  const int tiles = t_end - t_begin, mine = tiles > warp ? (tiles - warp + NW - 1) / NW : 0;

  load_q<T, D>(p, seq, hk, 0, 16, qs);
  cp_async_commit();
  // Lane r's pool block for key r of tile t (BN <= 32 keys a tile).
  auto page_of = [&](int t) {
    const int j = t * BN + lane;
    return seq.paged && lane < BN && j < seq.L ? seq.table[j / p.BS] : 0;
  };
  auto load_tile = [&](int t, int page, int stage) {
    for (int idx = lane; idx < BN * CH; idx += 32) {  // the same count on every lane
      const int r = idx / CH, c = idx % CH, j = t * BN + r;
      const int pg = __shfl_sync(0xffffffffu, page, r);
      const bool ok = j < seq.L;
      const size_t off = ok ? kv_row(p, seq, pg, hk, j) * D + c * 8 : 0;
      cp_async16(ks + (stage * BN + r) * LD + c * 8, k + off, ok);
      cp_async16(vs + (stage * BN + r) * LD + c * 8, v + off, ok);
    }
  };
  int page = mine > 0 ? page_of(t_begin + warp) : 0;
  if (mine > 0) load_tile(t_begin + warp, page, 0);
  cp_async_commit();
  if (mine > 1) page = page_of(t_begin + warp + NW);
  cp_async_wait<1>();  // this thread's part of Q has landed
  __syncthreads();     // and every thread's

  const WarpRows wr = warp_rows(p, seq, 0, gid);
  float acc[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  for (int i = 0; i < mine; ++i) {
    const int t = t_begin + warp + i * NW, stage = i & 1;
    if (i + 1 < mine) {
      load_tile(t + NW, page, stage ^ 1);
      if (i + 2 < mine) page = page_of(t + 2 * NW);  // read while this tile computes
    }
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just requested has landed
    __syncwarp();
    float s[NT][4];
    qk_scores<T, D, NT>(s, qs, ks + stage * BN * LD, lane);
    log2_scores<NT>(s, p, seq, wr.rows, t * BN, tile_whole(p, seq, wr, t * BN, BN), tig);
    online_softmax<NT, NO>(s, m2, l, acc);
    pv_accumulate<T, D, NT>(acc, s, vs + stage * BN * LD, lane);
    __syncwarp();  // this stage is consumed before the next iteration refills it
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its tiles: the merge reuses their memory

  float* part = reinterpret_cast<float*>(qs + 16 * LD);  // [NW][16][D]
  float* ml = part + NW * 16 * D;                        // [NW][16]: max, sum
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = gid + 8 * h;
    const float l_row = quad_sum(l[h]);
#pragma unroll
    for (int n = 0; n < NO; ++n)
      *reinterpret_cast<float2*>(part + (warp * 16 + r) * D + n * 8 + tig * 2) =
          make_float2(acc[n][2 * h], acc[n][2 * h + 1]);
    if (tig == 0) ml[(warp * 16 + r) * 2] = m2[h], ml[(warp * 16 + r) * 2 + 1] = l_row;
  }
  __syncthreads();

  // Row r's merge by the block's threads over 16 rows (8 with 4 warps), D / TR columns each.
  constexpr int TR = NW * 32 / 16;
  static_assert(D % (2 * TR) == 0, "each thread merges whole pairs of columns");
  const int r = threadIdx.x / TR, c0 = threadIdx.x % TR * (D / TR);
  if (r >= seq.M) return;
  float mx = -INFINITY, weight[NW], l_sum = 0.0f;
#pragma unroll
  for (int w = 0; w < NW; ++w) mx = fmaxf(mx, ml[(w * 16 + r) * 2]);
#pragma unroll
  for (int w = 0; w < NW; ++w) {
    const float mw = ml[(w * 16 + r) * 2];
    weight[w] = mw == -INFINITY ? 0.0f : exp2f(mw - mx);
    l_sum += weight[w] * ml[(w * 16 + r) * 2 + 1];
  }
  const int i = seq.first + r / p.G, head = hk * p.G + r % p.G;
  const RowEnd e = row_end(p, mx, l_sum, head);
  for (int c = c0; c < c0 + D / TR; c += 2) {
    float x0 = 0.0f, x1 = 0.0f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      x0 += weight[w] * part[(w * 16 + r) * D + c];
      x1 += weight[w] * part[(w * 16 + r) * D + c + 1];
    }
    store_pair<T, D>(p, split, seq.b, i, head, c, x0 * e.inv, x1 * e.inv);
  }
  if (threadIdx.x % TR == 0) store_lse(p, split, seq.b, i, head, e.lse);
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
  bool decode = false;    // flash_decode_kernel, else flash_mma_kernel in form `rows`
  bool hopper = false;    // not decode: flash_hopper_kernel (flash_hopper.cuh) instead
  bool pingpong = false;  // hopper, its consumers taking turns
  RowsForm rows = kRowsWide;
  int threads = 128;
  int row_blocks = 1;
  int splits = 1;
  size_t smem = 0;
};

// The block shape of one call and its split of the keys (flash_shape.hpp), on a device of
// sm_count multiprocessors and those limits. Paged: p.M is the longest sequence's packed rows,
// p.Skv its most keys, and the grid's y runs over p.S sequences.
template <typename T, int D>
LaunchShape launch_shape(const FlashParams& p, int sm_count, const FlashLimits& limits) {
  LaunchShape s;
  s.decode = flash_decode(p.M);
  s.rows = limits.rows;
  s.hopper = !s.decode && limits.hopper;
  s.pingpong = s.hopper && limits.pingpong;
  s.threads = s.hopper ? kHopperThreads : 32 * (s.decode ? decode_warps(D) : s.rows.warps);
  const int rows_per_block = 16 * s.rows.warps;
  s.row_blocks = s.decode ? 1 : std::max(1, (p.M + rows_per_block - 1) / rows_per_block);
  s.smem = s.decode   ? decode_smem_bytes(D)
           : s.hopper ? hopper_smem_bytes(D)
                      : rows_smem_bytes(s.rows, D);
  s.splits = flash_splits(p.M, p.query_start ? p.S : p.B, p.Hkv, p.Skv, D, sm_count, limits);
  return s;
}

// Calls f(kernel) with the rows kernel of a form (its warps and stages at head dim D).
template <typename T, int D, typename F>
void with_rows_kernel(RowsForm form, F&& f) {
  if (form.warps == kRowsWide.warps)
    f(flash_mma_kernel<T, D, kRowsWide.warps, rows_stages(kRowsWide, D)>);
  else
    f(flash_mma_kernel<T, D, kRowsNarrow.warps, rows_stages(kRowsNarrow, D)>);
}

}  // namespace sy::cuda::flash
