// The amx tier of rowdot.hpp: bf16 weights times bf16 x on AMX-BF16 tiles, for every M (a decode
// token as a prefill); every other weight and x dtype, and a K that is not whole steps of 32, as
// the avx512 tier (with bf16 dots). The tier this file is compiled for is chosen only where
// cpu_tier.cpp got tile state from the kernel.
//
// The arithmetic of one element: the tile product's 32 bf16 products per step added into one
// f32 accumulator, step after step along K, from zero; then y rounded once. The rows of x are
// the tile's columns, each computed on its own whatever the others hold (padding columns are
// zeros), so a row's result is the same alone or in a batch (batch invariance, rowdot.hpp).
// Weights are A tiles read in place (16 rows × 32 elements, the row stride apart); x is packed
// per thread into B tiles (16 pairs of K × 16 rows, 16 × 16 words transposed at a time).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "rowdot/rowdot.hpp"
#include "tier/amx_tiles.hpp"
#include "tier/scalar_math.hpp"
#include "tier/tier_scratch.hpp"
#include "tier/transpose16_avx512.hpp"

namespace sy::cpu {
namespace {

constexpr int kTile = 16;
constexpr int64_t kRowMultiple = 32;  // two weight tiles per step of the loop

bool amx_serves(const RowdotArgs& a) {
  return a.wtype == SY_DTYPE_BF16 && a.y_bf16 && a.xb && a.K % 32 == 0;
}

// x as B tiles: per 16 rows and step of 32 along K, [16 pairs][16 rows] words; rows past M zero.
void pack_x(const RowdotArgs& a, uint32_t* out) {
  const int64_t steps = a.K / 32, tiles = (a.M + kTile - 1) / kTile;
  const auto* x = reinterpret_cast<const uint32_t*>(a.xb);  // [M][K/2] pairs
  alignas(64) uint32_t block[kTile][kTile];
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t rows = std::min<int64_t>(kTile, a.M - t * kTile);
      for (int64_t r = 0; r < kTile; ++r)
        if (r < rows)
          std::memcpy(block[r], x + (t * kTile + r) * (a.K / 2) + s * kTile, 64);
        else
          std::memset(block[r], 0, 64);
      transpose16(&block[0][0], kTile, out + (t * steps + s) * kTile * kTile, kTile);
    }
}

// Tiles 0-3: C (weight tile i, x tile j at 2i + j); 4-5: A (weights); 6-7: B (x).
template <int NT, int MT>
void tile_block(const uint16_t* const* w, int64_t w_stride, const uint32_t* xt, int64_t steps,
                int64_t t0, float (*c)[kTile][kTile]) {
  _tile_zero(0);
  if constexpr (MT > 1) _tile_zero(1);
  if constexpr (NT > 1) _tile_zero(2);
  if constexpr (NT > 1 && MT > 1) _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t* b = xt + (t0 * steps + s) * kTile * kTile;
    _tile_loadd(6, b, 64);
    if constexpr (MT > 1) _tile_loadd(7, b + steps * kTile * kTile, 64);
    _tile_loadd(4, w[0] + 32 * s, w_stride);
    if constexpr (NT > 1) _tile_loadd(5, w[1] + 32 * s, w_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (MT > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (NT > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (NT > 1 && MT > 1) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c[0], 64);
  if constexpr (MT > 1) _tile_stored(1, c[1], 64);
  if constexpr (NT > 1) _tile_stored(2, c[2], 64);
  if constexpr (NT > 1 && MT > 1) _tile_stored(3, c[3], 64);
}

// y[m][n] = c[n - n0][m - m0] for the rows and columns that exist, rounded to bf16.
void store(const RowdotArgs& a, const float (&c)[kTile][kTile], int64_t n0, int64_t m0) {
  auto* y = static_cast<uint16_t*>(a.y);
  for (int64_t i = 0; i < kTile && m0 + i < a.M; ++i)
    for (int64_t r = 0; r < kTile && n0 + r < a.N; ++r)
      y[(m0 + i) * a.N + n0 + r] = from_f32<bf16_bits>(c[r][i]);
}

void amx_columns(const RowdotArgs& a, int64_t n0, int64_t n1) {
  const int64_t steps = a.K / 32, tiles = (a.M + kTile - 1) / kTile;
  // x packed; a last partial weight tile (tier_scratch.hpp: no container of its own here).
  auto* xt = static_cast<uint32_t*>(
      tier_scratch(ScratchSlot::packed_x, 4 * size_t(tiles * steps * kTile * kTile)));
  uint32_t* tail = nullptr;
  pack_x(a, xt);
  const auto* w = static_cast<const uint16_t*>(a.w);
  configure_full_tiles();
  float c[4][kTile][kTile];
  for (int64_t n = n0; n < n1; n += 2 * kTile) {
    const uint16_t* rows[2];
    int64_t stride = 2 * a.K;
    const int nt = n + kTile < n1 ? 2 : 1;
    if (n + nt * kTile > a.N) {  // rows past N: a zero-padded copy, never read past the weights
      const size_t tail_bytes = 4 * size_t(2 * kTile * a.K / 2);
      tail = static_cast<uint32_t*>(tier_scratch(ScratchSlot::tail, tail_bytes));
      std::memset(tail, 0, tail_bytes);
      std::memcpy(tail, w + n * a.K, 2 * size_t((a.N - n) * a.K));
      rows[0] = reinterpret_cast<const uint16_t*>(tail);
    } else {
      rows[0] = w + n * a.K;
    }
    rows[1] = rows[0] + kTile * a.K;
    int64_t t = 0;
    for (; t + 2 <= tiles; t += 2) {
      if (nt == 2)
        tile_block<2, 2>(rows, stride, xt, steps, t, c);
      else
        tile_block<1, 2>(rows, stride, xt, steps, t, c);
      for (int i = 0; i < nt; ++i)
        for (int j = 0; j < 2; ++j) store(a, c[2 * i + j], n + i * kTile, (t + j) * kTile);
    }
    if (t < tiles) {
      if (nt == 2)
        tile_block<2, 1>(rows, stride, xt, steps, t, c);
      else
        tile_block<1, 1>(rows, stride, xt, steps, t, c);
      for (int i = 0; i < nt; ++i) store(a, c[2 * i], n + i * kTile, t * kTile);
    }
  }
}

void columns(const RowdotArgs& a, int64_t n0, int64_t n1) {
  if (amx_serves(a)) return amx_columns(a, n0, n1);
  rowdot_avx512(true).columns(a, n0, n1);
}

bool reads_bf16(sy_dtype wtype, bool x_bf16) {
  return rowdot_avx512(true).reads_bf16_x(wtype, x_bf16);
}

const RowdotTier kTier = {"amx_bf16", columns, reads_bf16, kRowMultiple};

}  // namespace

const RowdotTier& rowdot_amx() {
  return kTier;
}

}  // namespace sy::cpu
