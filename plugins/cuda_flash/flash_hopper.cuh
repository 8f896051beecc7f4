// The sm_90a rows kernel of cuda_flash's flash attention (FlashAttention-3's structure): a block
// of three warpgroups, one producer and two consumers of 64 packed rows each, over tiles of 128
// keys in three shared-memory stages that mbarriers hand between them.
//
// - The producer fills a stage when both consumers have released it (the `empty` barrier), and
//   says so on the `full` barrier: by TMA (cp.async.bulk.tensor, the bytes completing the phase)
//   in the contiguous form without kv_len, where every row past the cache is outside the tensor
//   and arrives as zeros; by cp.async otherwise (paged, or a cache with kv_len: rows past a
//   sequence's keys are zero-filled, so a stale tail cannot turn 0 x NaN into NaN), which it
//   waits for, fences to the async proxy and arrives on. Q is loaded once, by cp.async.
// - Each consumer computes S = Q Kᵀ with wgmma (both operands in shared memory), the masks and
//   the online softmax of flash_kernel.cuh on the accumulator (whose per-warp layout is
//   mma.m16n8k16's), and O += P V with wgmma, P from registers and V MN-major; tile t's S and
//   tile t − 1's P V are in flight together, the softmax of tile t under the second (so a stage
//   is released a tile late, and three keep the producer a tile ahead). The two consumers issue
//   their products by turns (ping-pong, named barriers), so one's softmax runs under the other's.
// - Q, K and V sit in chunks of [128 rows][64 dims] with the 128-byte swizzle, the canonical
//   layout of the wgmma descriptors and the TMA box alike.
//
// Built for sm_90a only (flash_hopper.cu), and taken where prepare finds an sm_90 device, a head
// dim of 64 or 128 and SWITCHYARD_CUDA_FLASH_SM90A=on (or no-pingpong: the consumers issue
// freely; off by default until a device check has run it: docs/cuda_flash.md). Compiled by the
// host compiler under SY_CUDA_EMULATION with the test's models of the sm_90a instructions, as
// flash_kernel.cuh is.
#pragma once

#ifndef SY_CUDA_EMULATION
#include <cuda.h>  // CUtensorMap (a type only: the driver is reached through the runtime)
#endif

#include "flash_kernel.cuh"

namespace sy::cuda::flash {

// What a launch hands the kernel beside FlashParams: the tensor maps of K and V for the TMA
// path (tma 0: the producer loads by cp.async), and whether the consumers take turns.
struct HopperArgs {
#ifdef SY_CUDA_EMULATION
  sy_emu::TensorMap k, v;
#else
  CUtensorMap k, v;
#endif
  int tma;
  int pingpong;
};

// The TMA view of a contiguous K or V [B, Skv, Hkv, D]: dims (D, Hkv, Skv, B) innermost first,
// byte strides of the outer three, and a box of 64 dims x 1 head x 128 keys x 1 batch, so a row
// past Skv is outside the tensor and reads as zeros.
struct KvTensorShape {
  uint64_t dims[4];
  uint64_t strides[3];
  uint32_t box[4];
};
inline KvTensorShape kv_tensor_shape(const FlashParams& p, int d) {
  const uint64_t row = uint64_t(d) * 2;
  return {{uint64_t(d), uint64_t(p.Hkv), uint64_t(p.Skv), uint64_t(p.B)},
          {row, row * p.Hkv, row * p.Hkv * p.Skv},
          {64, 1, uint32_t(kHopperKeys), 1}};
}
// The TMA path serves the contiguous form without kv_len (in-bounds rows are all keys), and a
// cache with keys (a tensor map has no empty dimension).
inline bool hopper_tma(const FlashParams& p) {
  return p.query_start == nullptr && p.kv_len == nullptr && p.Skv > 0;
}

// ---- PTX wrappers (sm_90a) -------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
#ifdef SY_CUDA_EMULATION
  sy_emu::mbar_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
#endif
}
// Makes the barriers' initialisation visible to the async proxy (TMA) and the other threads.
__device__ __forceinline__ void mbar_init_fence() {
#ifndef SY_CUDA_EMULATION
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef SY_CUDA_EMULATION
  sy_emu::mbar_arrive(bar);
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
// Arrives, and makes the phase wait for `bytes` more of asynchronous copies.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
#ifdef SY_CUDA_EMULATION
  sy_emu::mbar_arrive(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#endif
}
// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
#ifdef SY_CUDA_EMULATION
  sy_emu::mbar_wait(bar, parity);
#else
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}
// Orders this thread's generic-proxy writes of shared memory (cp.async) before later
// async-proxy reads (wgmma).
__device__ __forceinline__ void fence_proxy_async() {
#ifndef SY_CUDA_EMULATION
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// The box of `map` at (c0, c1, c2, c3) into dst; its bytes complete on bar.
__device__ __forceinline__ void tma_load(void* dst, const HopperArgs& args, bool k, int c0, int c1,
                                         int c2, int c3, uint64_t* bar) {
#ifdef SY_CUDA_EMULATION
  const int c[4] = {c0, c1, c2, c3};
  sy_emu::tma_load(dst, k ? args.k : args.v, c, bar);
#else
  const void* map = k ? static_cast<const void*>(&args.k) : static_cast<const void*>(&args.v);
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
#endif
}

// Named barriers with a thread count: sync waits until `Threads` have arrived (this one among
// them), arrive counts this thread and goes on. The id is an immediate, so ptxas reserves the
// barriers used and no more (an id in a register reserves all 16).
template <int Id, int Threads>
__device__ __forceinline__ void named_bar_sync() {
#ifdef SY_CUDA_EMULATION
  sy_emu::named_bar(Id, Threads, true);
#else
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
#endif
}
template <int Id, int Threads>
__device__ __forceinline__ void named_bar_arrive() {
#ifdef SY_CUDA_EMULATION
  sy_emu::named_bar(Id, Threads, false);
#else
  asm volatile("bar.arrive %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
#endif
}

// Registers per thread of a warpgroup role (the producer gives up what the consumers take).
template <int N>
__device__ __forceinline__ void regs_decrease() {
#ifndef SY_CUDA_EMULATION
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void regs_increase() {
#ifndef SY_CUDA_EMULATION
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#ifndef SY_CUDA_EMULATION
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifndef SY_CUDA_EMULATION
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N of this warpgroup's committed wgmma groups are still in flight (they
// complete in order).
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifndef SY_CUDA_EMULATION
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// A shared-memory matrix descriptor: 128-byte swizzle, base offset 0 (every buffer is
// 1024-aligned), byte offsets in units of 16.
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  return uint64_t((smem_addr(p) >> 4) & 0x3FFF) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

// d (64 x N per warpgroup) += A (shared, K-major) · B (shared, K-major): S = Q Kᵀ.
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b);
// d += A (registers) · B (shared, MN-major): O += P V.
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b);

#ifdef SY_CUDA_EMULATION
template <typename T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b) {
  sy_emu::wgmma<T, N>(d, nullptr, a, b, false);
}
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b) {
  sy_emu::wgmma<T, N>(d, a, 0, b, true);
}
#else
// The accumulators are the instruction's operands one by one (m64nNk16: N/2 f32 a thread).
#define SY_ACC4(n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define SY_ACC_N64 \
  SY_ACC4(0), SY_ACC4(1), SY_ACC4(2), SY_ACC4(3), SY_ACC4(4), SY_ACC4(5), SY_ACC4(6), SY_ACC4(7)
#define SY_ACC_N128                                                                       \
  SY_ACC_N64, SY_ACC4(8), SY_ACC4(9), SY_ACC4(10), SY_ACC4(11), SY_ACC4(12), SY_ACC4(13), \
      SY_ACC4(14), SY_ACC4(15)
#define SY_REGS_N64                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define SY_REGS_N128                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, " \
  "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "  \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
  "%62, %63}"

// S = Q Kᵀ: d, a-desc, b-desc, scale-d, scale-a, scale-b, trans-a, trans-b (both K-major).
#define SY_WGMMA_SS(T, NAME, N, AB)                                                               \
  template <>                                                                                     \
  __device__ __forceinline__ void wgmma_ss<T, N>(float(&d)[N / 8][4], uint64_t a, uint64_t b) {   \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." NAME "." NAME " " SY_REGS_N##N \
                 ", " AB ", 1, 1, 1, 0, 0;\n"                                                     \
                 : SY_ACC_N##N                                                                    \
                 : "l"(a), "l"(b));                                                               \
  }
// O += P V: d, {a}, b-desc, scale-d, scale-a, scale-b, trans-b (V is MN-major).
#define SY_WGMMA_RS(T, NAME, N, AB)                                                               \
  template <>                                                                                     \
  __device__ __forceinline__ void wgmma_rs<T, N>(float(&d)[N / 8][4], const uint32_t(&a)[4],      \
                                                 uint64_t b) {                                    \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." NAME "." NAME " " SY_REGS_N##N \
                 ", " AB ", 1, 1, 1, 1;\n"                                                        \
                 : SY_ACC_N##N                                                                    \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                           \
  }
SY_WGMMA_SS(__nv_bfloat16, "bf16", 128, "%64, %65")
SY_WGMMA_SS(__half, "f16", 128, "%64, %65")
SY_WGMMA_RS(__nv_bfloat16, "bf16", 64, "{%32, %33, %34, %35}, %36")
SY_WGMMA_RS(__half, "f16", 64, "{%32, %33, %34, %35}, %36")
SY_WGMMA_RS(__nv_bfloat16, "bf16", 128, "{%64, %65, %66, %67}, %68")
SY_WGMMA_RS(__half, "f16", 128, "{%64, %65, %66, %67}, %68")
#undef SY_WGMMA_RS
#undef SY_WGMMA_SS
#undef SY_REGS_N128
#undef SY_REGS_N64
#undef SY_ACC_N128
#undef SY_ACC_N64
#undef SY_ACC4
#endif

// Keeps the compiler from moving registers the asynchronous wgmma reads or writes (accumulators
// f32, A fragments u32) across it, or reusing them early: each is read and written here as far
// as it knows, and so the A fragments' conversions stay before the wgmma.fence (ptxas need not
// serialise the wgmmas that read them).
template <typename V, int N>
__device__ __forceinline__ void fence_operands([[maybe_unused]] V (&d)[N][4]) {
  static_assert(sizeof(V) == 4, "f32 accumulators or u32 fragments");
#ifndef SY_CUDA_EMULATION
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (std::is_same_v<V, float>)
        asm volatile("" : "+f"(d[n][e])::"memory");
      else
        asm volatile("" : "+r"(d[n][e])::"memory");
    }
#endif
}

// ---- the kernel -------------------------------------------------------------------------------

// Byte offset of 16-byte piece u (of 8) of row r in a [rows][64] chunk with the 128-byte swizzle.
__device__ __forceinline__ uint32_t swizzled(int r, int u) {
  return uint32_t(r) * 128 + (uint32_t(u ^ (r & 7)) << 4);
}

// One block's buffers (1024-aligned), barriers and share of the work.
struct HopperBlock {
  unsigned char *qs, *ks, *vs;  // Q; K and V stages, each [D/64][128][64] swizzled
  uint64_t *full, *empty, *q_full;
  BlockSeq seq;
  int hk, R0, t_begin, t_end;
};

constexpr uint32_t kHopperChunk = 128 * 64 * 2;  // one [128][64] chunk of 16-bit elements

// The block's 128 rows of Q into its swizzled chunks, zeros past the sequence's rows, by the
// producer warpgroup's cp.async (t128: the thread's index in it).
template <typename T, int D>
__device__ __forceinline__ void hopper_load_q(const FlashParams& p, const HopperBlock& b,
                                              int t128) {
  constexpr int P = D / 8;  // 16-byte pieces a row
  const T* q = static_cast<const T*>(p.q);
  const BlockSeq& s = b.seq;
  for (int idx = t128; idx < 128 * P; idx += 128) {
    const int r = idx / P, piece = idx % P, R = b.R0 + r;
    const bool ok = R < s.M;
    const T* src = q;
    if (ok)
      src = q + ((size_t(s.b) * p.Sq + s.first + R / p.G) * p.Hq + b.hk * p.G + R % p.G) * D +
            piece * 8;
    cp_async16(b.qs + (piece / 8) * kHopperChunk + swizzled(r, piece % 8), src, ok);
  }
}

// Tile t's K and V rows into the swizzled chunks at kd and vd by cp.async (paged through the
// block table), zeros past the sequence's keys.
template <typename T, int D>
__device__ __forceinline__ void hopper_load_tile(const FlashParams& p, const HopperBlock& b, int t,
                                                 unsigned char* kd, unsigned char* vd, int t128) {
  constexpr int P = D / 8;
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const BlockSeq& s = b.seq;
  for (int idx = t128; idx < kHopperKeys * P; idx += 128) {
    const int r = idx / P, piece = idx % P, j = t * kHopperKeys + r;
    const bool ok = j < s.L;
    const size_t off =
        ok ? kv_row(p, s, s.paged ? s.table[j / p.BS] : 0, b.hk, j) * D + piece * 8 : 0;
    const uint32_t at = (piece / 8) * kHopperChunk + swizzled(r, piece % 8);
    cp_async16(kd + at, k + off, ok);
    cp_async16(vd + at, v + off, ok);
  }
}

// The producer warpgroup: Q, then every tile of the block's range into its stage once both
// consumers have released it. What it wrote by cp.async it waits for and fences to the async
// proxy (the wgmma's) before arriving.
template <typename T, int D>
__device__ __forceinline__ void hopper_produce(const FlashParams& p, const HopperArgs& args,
                                               const HopperBlock& b, int t128) {
  constexpr int ST = kHopperStages;
  constexpr uint32_t kTile = uint32_t(hopper_tile_bytes(D));
  hopper_load_q<T, D>(p, b, t128);
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  mbar_arrive(b.q_full);

  const bool tma = args.tma != 0;
  if (tma && t128 != 0) return;  // one thread issues the TMA; the others would only spin
  for (int t = b.t_begin; t < b.t_end; ++t) {
    const int i = t - b.t_begin, stage = i % ST;
    if (i >= ST) mbar_wait(&b.empty[stage], (i / ST - 1) & 1);
    unsigned char* kd = b.ks + stage * kTile;
    unsigned char* vd = b.vs + stage * kTile;
    if (tma) {
      mbar_arrive_expect_tx(&b.full[stage], 2 * kTile);
      for (int c = 0; c < D / 64; ++c) {
        const int key = t * kHopperKeys;
        tma_load(kd + c * kHopperChunk, args, true, c * 64, b.hk, key, b.seq.b, &b.full[stage]);
        tma_load(vd + c * kHopperChunk, args, false, c * 64, b.hk, key, b.seq.b, &b.full[stage]);
      }
      continue;
    }
    hopper_load_tile<T, D>(p, b, t, kd, vd, t128);
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    mbar_arrive(&b.full[stage]);
  }
}

// One consumer warpgroup's 64 rows against the tiles: Q and the stage's K and V in shared
// memory (qw: its rows of Q).
template <typename T, int D>
struct HopperTiles {
  static constexpr int BN = kHopperKeys, NT = BN / 8, NO = D / 8;
  static constexpr uint32_t kTile = uint32_t(hopper_tile_bytes(D));
  const unsigned char *qw, *ks, *vs;

  // Issues S = Q Kᵀ of the tile in `stage` as one wgmma group.
  __device__ __forceinline__ void issue_qk(float (&s)[NT][4], int stage) const {
    const unsigned char* kt = ks + stage * kTile;
#pragma unroll
    for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    fence_operands(s);
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {  // dims 16 kc .. +16: 32 bytes further in the atom
      const uint32_t at = (kc / 4) * kHopperChunk + (kc % 4) * 32;
      wgmma_ss<T, BN>(s, smem_desc(qw + at, 16, 1024), smem_desc(kt + at, 16, 1024));
    }
    wgmma_commit();
  }
  // Issues O += P V of the tile in `stage` as one wgmma group.
  __device__ __forceinline__ void issue_pv(float (&acc)[NO][4], uint32_t (&pa)[NT / 2][4],
                                           int stage) const {
    const unsigned char* vt = vs + stage * kTile;
    fence_operands(pa);
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < NT / 2; ++k16)  // keys 16 k16 .. +16: 2048 bytes further
      wgmma_rs<T, D>(acc, pa[k16], smem_desc(vt + k16 * 16 * 128, kHopperChunk, 1024));
    wgmma_commit();
  }
};

// FlashAttention-3's ping-pong of the two consumers: a warpgroup issues a tile's products only
// in its turn (named barrier 1 + cw, which the other's arrival opens; 0 is __syncthreads') and
// hands the turn on once they are issued, so one's softmax runs under the other's wgmmas. The
// second consumer opens the first turn, and skips the hand-over after its last tile, so each
// barrier sees as many arrivals as waits and none is left part-arrived at exit. Only where both
// consumers have rows and there are tiles (a warpgroup past the sequence takes no turns).
struct Turns {
  bool on;
  int cw, last;  // last: the block's last tile
  __device__ __forceinline__ void open() const {
    if (on && cw == 1) named_bar_arrive<1, 256>();
  }
  __device__ __forceinline__ void take() const {
    if (!on) return;
    if (cw == 0)
      named_bar_sync<1, 256>();
    else
      named_bar_sync<2, 256>();
  }
  __device__ __forceinline__ void pass(int t) const {
    if (!on) return;
    if (cw == 0)
      named_bar_arrive<2, 256>();
    else if (t != last)
      named_bar_arrive<1, 256>();
  }
};

// A consumer warpgroup (cw: 0 or 1) over its 64 packed rows from R0 + 64 cw, FlashAttention-3's
// overlap within the warpgroup: S of tile t and O += P V of tile t − 1 are issued together (in
// the warpgroup's turn where pingpong), and the softmax of tile t runs while the second product
// is in flight; once it has landed, the stage of tile t − 1 is released. The accumulators take
// tile t − 1's max (its factor, corr) just before that product is issued, while S's wgmma runs.
// A warpgroup whose rows are all past the sequence still waits for each tile and releases it,
// so the producer's count holds.
template <typename T, int D>
__device__ __forceinline__ void hopper_consume(const FlashParams& p, const HopperBlock& b, int cw,
                                               bool pingpong) {
  using Tiles = HopperTiles<T, D>;
  constexpr int BN = kHopperKeys, ST = kHopperStages, NT = Tiles::NT, NO = Tiles::NO;
  const int split = blockIdx.z, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const int gid = lane >> 2, tig = lane & 3;
  const BlockSeq& seq = b.seq;
  const WarpRows wr = warp_rows(p, seq, b.R0 + cw * 64 + warp * 16, gid);
  const Tiles tiles{b.qs + cw * 64 * 128, b.ks, b.vs};
  auto stage = [&](int t) { return (t - b.t_begin) % ST; };
  auto wait_full = [&](int t) { mbar_wait(&b.full[stage(t)], ((t - b.t_begin) / ST) & 1); };
  const Turns turns{pingpong && b.R0 + 64 < seq.M && b.t_begin < b.t_end, cw, b.t_end - 1};
  mbar_wait(b.q_full, 0);
  if (b.R0 + cw * 64 >= seq.M) {  // warpgroup-uniform
    for (int t = b.t_begin; t < b.t_end; ++t) {
      wait_full(t);
      mbar_arrive(&b.empty[stage(t)]);
    }
    return;
  }
  float acc[NO][4];
#pragma unroll
  for (int n = 0; n < NO; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m2[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
  uint32_t pa[NT / 2][4];  // P of the tile before, in flight in O += P V
  // S of tile t (landed) into P fragments, the running max and sum moving on.
  auto to_p = [&](int t, float(&s)[NT][4], uint32_t(&a)[NT / 2][4]) {
    fence_operands(s);
    log2_scores<NT>(s, p, seq, wr.rows, t * BN, tile_whole(p, seq, wr, t * BN, BN), tig);
    softmax_tile<NT>(s, m2, l, corr);
#pragma unroll
    for (int k16 = 0; k16 < NT / 2; ++k16) p_fragment<T, NT>(a[k16], s, k16);
  };

  turns.open();
  if (b.t_begin < b.t_end) {  // the first tile's S alone: the accumulators are still zero
    float s[NT][4];
    wait_full(b.t_begin);
    turns.take();
    tiles.issue_qk(s, stage(b.t_begin));
    turns.pass(b.t_begin);
    wgmma_wait<0>();
    to_p(b.t_begin, s, pa);
  }
  for (int t = b.t_begin + 1; t < b.t_end; ++t) {
    float s[NT][4];
    uint32_t next[NT / 2][4];
    wait_full(t);
    turns.take();
    tiles.issue_qk(s, stage(t));
    rescale<NO>(acc, corr);  // to tile t − 1's max, under the wgmma of S
    tiles.issue_pv(acc, pa, stage(t - 1));
    turns.pass(t);
    wgmma_wait<1>();  // S has landed; O += P V may still run
    to_p(t, s, next);
    wgmma_wait<0>();
    fence_operands(pa);
    fence_operands(acc);
    mbar_arrive(&b.empty[stage(t - 1)]);
#pragma unroll
    for (int k16 = 0; k16 < NT / 2; ++k16)
#pragma unroll
      for (int e = 0; e < 4; ++e) pa[k16][e] = next[k16][e];
  }
  if (b.t_begin < b.t_end) {
    rescale<NO>(acc, corr);
    tiles.issue_pv(acc, pa, stage(b.t_end - 1));
    wgmma_wait<0>();
    fence_operands(pa);
    fence_operands(acc);
    mbar_arrive(&b.empty[stage(b.t_end - 1)]);
  }

  store_rows<T, D>(p, seq, wr.rows, b.hk, split, m2, l, acc, tig);
}

template <typename T, int D>
__global__ void __launch_bounds__(kHopperThreads, 1)
    flash_hopper_kernel(const FlashParams p, const __grid_constant__ HopperArgs args) {
  static_assert(sizeof(T) == 2 && hopper_head_dim(D), "16-bit elements, D = 64 or 128");
  constexpr int BM = 16 * kRowsWide.warps, ST = kHopperStages;
  constexpr uint32_t kTile = uint32_t(hopper_tile_bytes(D));
  SY_DYNAMIC_SHARED(smem);
  HopperBlock b;
  b.qs = smem + (1024 - smem_addr(smem) % 1024) % 1024;
  b.ks = b.qs + kTile;
  b.vs = b.ks + ST * kTile;
  b.full = reinterpret_cast<uint64_t*>(b.vs + ST * kTile);
  b.empty = b.full + ST;
  b.q_full = b.empty + ST;
  // Heaviest causal row blocks first, so the short ones fill the tail.
  b.R0 = (gridDim.x - 1 - blockIdx.x) * BM;
  b.hk = blockIdx.y % p.Hkv;
  b.seq = block_seq(p, blockIdx.y / p.Hkv);
  if (b.R0 >= b.seq.M) return;  // rows of a shorter sequence than the grid's longest
  split_tiles(p, b.seq, b.R0, BM, kHopperKeys, blockIdx.z, b.t_begin, b.t_end);
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(&b.full[s], args.tma ? 1 : 128);  // the expect_tx arrival, or every producer
      mbar_init(&b.empty[s], 256);                // every consumer thread
    }
    mbar_init(b.q_full, 128);
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    regs_decrease<40>();
    hopper_produce<T, D>(p, args, b, int(threadIdx.x));
    return;
  }
  regs_increase<232>();
  hopper_consume<T, D>(p, b, int(threadIdx.x / 128) - 1, args.pingpong != 0);
}

}  // namespace sy::cuda::flash
