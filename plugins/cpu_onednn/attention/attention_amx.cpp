// AMX attention blocks: the bf16 products of the flash-attention blocks on AMX-BF16 tiles, the
// online softmax between them on AVX-512 (the avx512 blocks' own). This file alone is compiled
// with AMX flags; attention_generic.cpp calls it only on the amx tier (cpu_tier.cpp checked the
// CPU and got tile state from the kernel).
//
// Every tile is 16 rows of 64 bytes, so one configuration serves both products:
// - scores S[j][r] = K[j] · Q[r]: A = 16 keys × 32 dims read straight from the cache (rows
//   k_stride apart), B = Qᵀ in pairs of dims (the avx512 pack_q's [D/2][Mp]), C = 16 keys × 16
//   query rows of the transposed scores the softmax wants;
// - values O[r] += Σ_j P[r][j] V[j]: A = 16 rows × 32 keys of P in bf16 (P^T's pairs of keys,
//   transposed 16 × 16 words at a time), B = V in pairs of keys (the avx512 pack_v), C = 16 rows
//   × 16 dims of O, scaled by α first.
// A tile adds its 32 products into each f32 accumulator in a fixed order, whatever the other
// rows are, so every row's result depends on that row only (the driver's blocks decide which
// keys meet in a block, as on every tier).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tier/amx_tiles.hpp"
#include "attention/attention_blocks.hpp"
#include "cpu_kernel.hpp"
#include "tier/transpose16_avx512.hpp"

namespace sy::cpu {
namespace {

constexpr int kKeyStep = 32;  // keys per values product: one A tile row of bf16
constexpr int kPairs = kBlockKeys / 2;

// ---- scores ----------------------------------------------------------------------------
// Tiles 0-3: C (key tile a, row tile b at 2a + b); 4-5: A (keys); 6-7: B (query pairs).
template <int KT, int RT>
void scores_tiles(const uint16_t* const* keys, const int64_t* key_stride, const uint32_t* qt,
                  int Mp, int D, int r0, float* s) {
  _tile_zero(0);
  if constexpr (RT > 1) _tile_zero(1);
  if constexpr (KT > 1) _tile_zero(2);
  if constexpr (KT > 1 && RT > 1) _tile_zero(3);
  const int64_t qt_stride = 4 * int64_t(Mp);
  for (int d = 0; d < D; d += 32) {
    const uint32_t* b = qt + size_t(d / 2) * Mp + r0;
    _tile_loadd(6, b, qt_stride);
    if constexpr (RT > 1) _tile_loadd(7, b + 16, qt_stride);
    _tile_loadd(4, keys[0] + d, key_stride[0]);
    if constexpr (KT > 1) _tile_loadd(5, keys[1] + d, key_stride[1]);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (RT > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (KT > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (KT > 1 && RT > 1) _tile_dpbf16ps(3, 5, 7);
  }
  const int64_t s_stride = 4 * int64_t(Mp);
  _tile_stored(0, s + r0, s_stride);
  if constexpr (RT > 1) _tile_stored(1, s + r0 + 16, s_stride);
  if constexpr (KT > 1) _tile_stored(2, s + 16 * size_t(Mp) + r0, s_stride);
  if constexpr (KT > 1 && RT > 1) _tile_stored(3, s + 16 * size_t(Mp) + r0 + 16, s_stride);
}

template <int KT>
void scores_rows(const uint16_t* const* keys, const int64_t* key_stride, const uint32_t* qt, int Mp,
                 int D, float* s) {
  int r0 = 0;
  for (; r0 + 32 <= Mp; r0 += 32) scores_tiles<KT, 2>(keys, key_stride, qt, Mp, D, r0, s);
  if (r0 < Mp) scores_tiles<KT, 1>(keys, key_stride, qt, Mp, D, r0, s);
}

// The scores of n keys in tiles of 16 (tile t's rows at keys[t], stride[t] elements apart; every
// tile readable for 16 rows).
void scores_of_tiles(const uint32_t* qt, const uint16_t* const* keys, const int64_t* stride, int n,
                     int Mp, int D, float* s) {
  const int tiles = (n + 15) / 16;
  int64_t bytes[kBlockKeys / 16];
  for (int t = 0; t < tiles; ++t) bytes[t] = 2 * stride[t];
  configure_full_tiles();
  int t = 0;
  for (; t + 2 <= tiles; t += 2)
    scores_rows<2>(keys + t, bytes + t, qt, Mp, D, s + 16 * size_t(t) * Mp);
  if (t < tiles) scores_rows<1>(keys + t, bytes + t, qt, Mp, D, s + 16 * size_t(t) * Mp);
}

void scores(const void* qt_, const void* k0_, int64_t ks, int n, int M, int Mp, int D, float* s) {
  if (D % 32 != 0)  // a half tile of dims: the avx512 dots
    return avx512_block_kernels(true).scores(qt_, k0_, ks, n, M, Mp, D, s);
  const auto* k = static_cast<const uint16_t*>(k0_);
  // A key tile past the block's last key would read past the cache: its rows go through a
  // zeroed copy (rows n.. of S are then zeros the softmax never reads).
  alignas(64) static thread_local uint16_t tail[16 * kAttentionHeadDimMax];
  const int tiles = (n + 15) / 16;
  const uint16_t* keys[kBlockKeys / 16];
  int64_t stride[kBlockKeys / 16];
  for (int t = 0; t < tiles; ++t) keys[t] = k + t * 16 * ks, stride[t] = ks;
  if (n % 16 != 0) {
    const int t = tiles - 1, rows = n - 16 * t;
    std::memset(tail, 0, sizeof(uint16_t) * 16 * D);
    for (int j = 0; j < rows; ++j) std::memcpy(tail + j * D, keys[t] + j * ks, 2 * size_t(D));
    keys[t] = tail;
    stride[t] = D;
  }
  scores_of_tiles(static_cast<const uint32_t*>(qt_), keys, stride, n, Mp, D, s);
  (void)M;
}

// ---- values ----------------------------------------------------------------------------
// The values' scratch: P^T pairs [kPairs][Mp], P rows [Mp][kPairs] (pairs of keys per row),
// V pairs [kPairs][D], and a 16-row O tile for a row tile past M.
struct PvScratch {
  uint32_t *pt, *pr, *v2;
  float* o_tail;
};

PvScratch pv_scratch(void* scratch, int Mp, int D) {
  auto* w = static_cast<uint32_t*>(scratch);
  PvScratch p;
  p.pt = w;
  p.pr = p.pt + size_t(kPairs) * Mp;
  p.v2 = p.pr + size_t(kPairs) * Mp;
  p.o_tail = reinterpret_cast<float*>(p.v2 + size_t(kPairs) * D);
  return p;
}

size_t pv_scratch_bytes(int Mp, int D) {
  return sizeof(uint32_t) * (2 * size_t(kPairs) * Mp + size_t(kPairs) * D + 16 * size_t(D));
}

// Tiles 0-3: C (row tile a, dim tile b at 2a + b); 4-5: A (P rows); 6-7: B (V pairs).
template <int RT, int DT>
void pv_tiles(float* const* o, int64_t o_stride, const uint32_t* pr, int r0, const uint32_t* v2,
              int D, int d0, int steps) {
  _tile_loadd(0, o[0] + d0, o_stride);
  if constexpr (DT > 1) _tile_loadd(1, o[0] + d0 + 16, o_stride);
  if constexpr (RT > 1) _tile_loadd(2, o[1] + d0, o_stride);
  if constexpr (RT > 1 && DT > 1) _tile_loadd(3, o[1] + d0 + 16, o_stride);
  constexpr int64_t pr_stride = 4 * kPairs;
  const int64_t v_stride = 4 * int64_t(D);
  for (int step = 0; step < steps; ++step) {
    const uint32_t* a = pr + size_t(r0) * kPairs + 16 * step;
    const uint32_t* b = v2 + size_t(16 * step) * D + d0;
    _tile_loadd(4, a, pr_stride);
    if constexpr (RT > 1) _tile_loadd(5, a + 16 * kPairs, pr_stride);
    _tile_loadd(6, b, v_stride);
    if constexpr (DT > 1) _tile_loadd(7, b + 16, v_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (DT > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (RT > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (RT > 1 && DT > 1) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, o[0] + d0, o_stride);
  if constexpr (DT > 1) _tile_stored(1, o[0] + d0 + 16, o_stride);
  if constexpr (RT > 1) _tile_stored(2, o[1] + d0, o_stride);
  if constexpr (RT > 1 && DT > 1) _tile_stored(3, o[1] + d0 + 16, o_stride);
}

template <int RT>
void pv_dims(float* const* o, const uint32_t* pr, int r0, const uint32_t* v2, int D, int steps) {
  const int64_t o_stride = 4 * int64_t(D);
  int d0 = 0;
  for (; d0 + 32 <= D; d0 += 32) pv_tiles<RT, 2>(o, o_stride, pr, r0, v2, D, d0, steps);
  if (d0 < D) pv_tiles<RT, 1>(o, o_stride, pr, r0, v2, D, d0, steps);
}

// o[r] *= alpha[r] for the M real rows (D is a multiple of 16).
void scale_rows(float* o, const float* alpha, int M, int D) {
  for (int r = 0; r < M; ++r) {
    if (alpha[r] == 1.f) continue;  // the row's running max did not move: nothing to scale
    const __m512 a = _mm512_set1_ps(alpha[r]);
    float* row = o + size_t(r) * D;
    for (int d = 0; d < D; d += 16)
      _mm512_storeu_ps(row + d, _mm512_mul_ps(_mm512_loadu_ps(row + d), a));
  }
}

// P as A tiles: the pairs of keys of each row, zero past the block's keys.
void pack_p_rows(const float* p, int n, int Mp, int steps, const PvScratch& w) {
  const int pairs = (n + 1) / 2, rows = 16 * steps;
  avx512_pack_p_bf16(p, n, Mp, w.pt);
  std::memset(w.pt + size_t(pairs) * Mp, 0, sizeof(uint32_t) * size_t(rows - pairs) * Mp);
  for (int j = 0; j < rows; j += 16)
    for (int r = 0; r < Mp; r += 16)
      transpose16(w.pt + size_t(j) * Mp + r, Mp, w.pr + size_t(r) * kPairs + j, kPairs);
}

// PV with P given as rows of bf16 key pairs at pr ([Mp][kPairs], finite, zero past n), values in
// tiles of 16 (tile t's rows at vals[t], stride[t] elements apart; only the n keys' rows are
// read).
void pv_of_rows(const uint32_t* pr, const uint16_t* const* vals, const int64_t* stride, int n,
                int M, int D, const float* alpha, float* o, const PvScratch& w) {
  const int steps = (n + kKeyStep - 1) / kKeyStep, pairs = (n + 1) / 2;
  for (int t = 0; 16 * t < n; ++t)
    avx512_pack_v_bf16(vals[t], stride[t], std::min(16, n - 16 * t), D, w.v2 + size_t(8 * t) * D);
  std::memset(w.v2 + size_t(pairs) * D, 0, sizeof(uint32_t) * size_t(16 * steps - pairs) * D);
  scale_rows(o, alpha, M, D);
  configure_full_tiles();
  // Row tiles of O in place; one that runs past M goes through o_tail.
  auto row_tile = [&](int r0) { return r0 + 16 <= M ? o + size_t(r0) * D : w.o_tail; };
  int r0 = 0;
  for (; r0 + 32 <= M; r0 += 32) {
    float* rows[2] = {row_tile(r0), row_tile(r0 + 16)};
    pv_dims<2>(rows, pr, r0, w.v2, D, steps);
  }
  for (; r0 < M; r0 += 16) {
    const int real = M - r0 < 16 ? M - r0 : 16;
    float* rows[1] = {row_tile(r0)};
    if (real < 16) {
      std::memset(w.o_tail, 0, sizeof(float) * 16 * size_t(D));
      std::memcpy(w.o_tail, o + size_t(r0) * D, sizeof(float) * size_t(real) * D);
    }
    pv_dims<1>(rows, pr, r0, w.v2, D, steps);
    if (real < 16) std::memcpy(o + size_t(r0) * D, w.o_tail, sizeof(float) * size_t(real) * D);
  }
}

void pv(const float* p, const void* v0, int64_t vs, int n, int M, int Mp, int D, const float* alpha,
        float* o, void* scratch) {
  const PvScratch w = pv_scratch(scratch, Mp, D);
  pack_p_rows(p, n, Mp, (n + kKeyStep - 1) / kKeyStep, w);
  const uint16_t* vals[kBlockKeys / 16];
  int64_t stride[kBlockKeys / 16];
  for (int t = 0; 16 * t < n; ++t)
    vals[t] = static_cast<const uint16_t*>(v0) + 16 * t * vs, stride[t] = vs;
  pv_of_rows(w.pr, vals, stride, n, M, D, alpha, o, w);
}

const BlockKernels& bf16_blocks() {
  static const BlockKernels k = [] {
    BlockKernels b = avx512_block_kernels(true);
    b.name = "amx_bf16";
    b.block_keys = kBlockKeys;
    b.prefetch_next = false;
    b.scores = scores;
    b.pv = pv;
    b.pv_scratch_bytes = pv_scratch_bytes;
    return b;
  }();
  return k;
}

}  // namespace

// f32 has no tiles: the avx512 blocks.
const BlockKernels& amx_block_kernels(bool bf16) {
  return bf16 ? bf16_blocks() : avx512_block_kernels(false);
}

void amx_scores_tiles(const void* qt, const uint16_t* const* keys, const int64_t* stride, int n,
                      int Mp, int D, float* s) {
  scores_of_tiles(static_cast<const uint32_t*>(qt), keys, stride, n, Mp, D, s);
}

void amx_pv_rows(const uint32_t* pr, const uint16_t* const* vals, const int64_t* stride, int n,
                 int M, int Mp, int D, const float* alpha, float* o, void* scratch) {
  pv_of_rows(pr, vals, stride, n, M, D, alpha, o, pv_scratch(scratch, Mp, D));
}

}  // namespace sy::cpu
