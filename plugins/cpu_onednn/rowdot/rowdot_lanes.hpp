// The avx2 and portable tiers of rowdot.hpp, written once over a tier's f32 lanes (Ops,
// simd_lanes.hpp: 8 lanes for both) and compiled per tier (and the weight sweep and row sizes
// the avx2 and avx512 decoders share) (rowdot_avx2.cpp,
// rowdot_portable.cpp). Weight rows are decoded into an f32 panel in L1, kPanelRows at a time,
// by the quant tier's dequantization (GGUF's formulas) or by widening bf16; f32 rows are read in
// place. A tile of RN panel rows × RM x rows then runs every element's arithmetic: chunk after
// chunk of L elements into one accumulator, the lanes summed by halving. The panel holds
// the same values whatever M is, and every element is one tile lane's sum over all of K, so a row
// of y does not depend on the other rows of x. Internal linkage (scalar_math.hpp says why).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant_blocks.hpp"
#include "quant/quant_tier.hpp"
#include "rowdot/rowdot.hpp"
#include "tier/register_tile.hpp"
#include "tier/scalar_math.hpp"
#include "tier/simd_lanes.hpp"

namespace sy::cpu {
namespace {

constexpr int64_t kLanePanelRows = 8;  // weight rows decoded at once
constexpr int64_t kLaneXBlock = 64;    // x rows a panel serves before the next panel
constexpr int kDirectLaneRows = 2;     // x rows up to which quantized blocks are used at once

// Prefetches a thread's weight rows in address order, kSweepAhead bytes beyond the furthest byte
// read so far (the rows of a tile are separate streams the hardware prefetchers lose track of).
constexpr int64_t kSweepAhead = 6144;
struct Sweep {
  const uint8_t* next;
  explicit Sweep(const uint8_t* first) : next(first + kSweepAhead) {}
  void reach(const uint8_t* read) {
    for (const uint8_t* want = read + kSweepAhead; next < want; next += 64)
      __builtin_prefetch(next, 0, 3);
  }
};

// Bytes of a weight row of K elements for a tier's decoder D (kBlock elements in kBytes; f32 and
// bf16 rows are blocks of 32 with a tail).
template <class D>
int64_t row_bytes_of(int64_t K) {
  return K / D::kBlock * D::kBytes + (D::kTail ? (K % D::kBlock) * (D::kBytes / D::kBlock) : 0);
}

inline void lane_store(const RowdotArgs& a, int64_t m, int64_t n, float v) {
  if (a.y_bf16)
    static_cast<bf16_bits*>(a.y)[m * a.N + n] = from_f32<bf16_bits>(v);
  else
    static_cast<float*>(a.y)[m * a.N + n] = v;
}

// Lanes 0..valid-1 of p, zeros above (a tail of K).
template <class Ops>
inline typename Ops::V load_part(const float* p, int64_t valid) {
  alignas(64) float t[Ops::kLanes] = {};
  std::memcpy(t, p, size_t(valid) * sizeof(float));
  return Ops::load(t);
}

// RN rows of `w` (`ldw` floats apart; y's columns n…) × RM rows of x from m0, over all of K.
template <class Ops, int RN, int RM>
void lane_tile(const RowdotArgs& a, const float* w, int64_t ldw, int64_t n, int64_t m0) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  const int64_t K = a.K, chunks = K / L, valid = K % L;
  V acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = Ops::zero();
  }
  auto step = [&](const V(&wv)[RN], const V(&xv)[RM]) {
    SY_TILE_LOOP
    for (int r = 0; r < RN; ++r) {
      SY_TILE_LOOP
      for (int m = 0; m < RM; ++m) acc[r][m] = Ops::madd(wv[r], xv[m], acc[r][m]);
    }
  };
  for (int64_t c = 0; c < chunks; ++c) {
    V wv[RN], xv[RM];
    SY_TILE_LOOP
    for (int r = 0; r < RN; ++r) wv[r] = Ops::load(w + r * ldw + L * c);
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) xv[m] = Ops::load(a.xf + (m0 + m) * K + L * c);
    step(wv, xv);
  }
  if (valid > 0) {
    V wv[RN], xv[RM];
    for (int r = 0; r < RN; ++r) wv[r] = load_part<Ops>(w + r * ldw + L * chunks, valid);
    for (int m = 0; m < RM; ++m) xv[m] = load_part<Ops>(a.xf + (m0 + m) * K + L * chunks, valid);
    step(wv, xv);
  }
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) lane_store(a, m0 + m, n + r, Ops::sum(acc[r][m]));
  }
}

// Panel rows [0, rows) (y's columns from n) × x rows [m0, m1): 4 × 3 tiles (12 accumulators
// and 7 operands: avx2's 16 registers, nearly), 4 × 1 for the last x rows, narrower at the edges.
template <class Ops>
void lane_tiles(const RowdotArgs& a, const float* w, int64_t ldw, int64_t rows, int64_t n,
                int64_t m0, int64_t m1) {
  int64_t m = m0;
  for (; m + 3 <= m1; m += 3) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) lane_tile<Ops, 4, 3>(a, w + r * ldw, ldw, n + r, m);
    for (; r < rows; ++r) lane_tile<Ops, 1, 3>(a, w + r * ldw, ldw, n + r, m);
  }
  for (; m < m1; ++m) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) lane_tile<Ops, 4, 1>(a, w + r * ldw, ldw, n + r, m);
    for (; r < rows; ++r) lane_tile<Ops, 1, 1>(a, w + r * ldw, ldw, n + r, m);
  }
}

// Weight rows [n, n + rows) as f32: in place for f32 weights, else decoded into `panel`.
inline const float* lane_panel(const RowdotArgs& a, const QuantTier& quant, int64_t n, int64_t rows,
                               float* panel) {
  if (a.wtype == SY_DTYPE_F32) return static_cast<const float*>(a.w) + n * a.K;
  if (a.wtype == SY_DTYPE_BF16) {
    const bf16_bits* w = static_cast<const bf16_bits*>(a.w) + n * a.K;
    for (int64_t i = 0; i < rows * a.K; ++i) panel[i] = to_f32(w[i]);
    return panel;
  }
  quant.dequant_rows(a.wtype, static_cast<const uint8_t*>(a.w), a.K, n, n + rows, panel);
  return panel;
}

// Decode-sized M with block-quantized weights: each block of RN rows dequantized into a small
// buffer in L1 and used at once (the weights are read once, in their quantized bytes), the same
// values and chunk order as the panel's.
template <class Ops, int RN>
void lane_block_tile(const RowdotArgs& a, DequantBlockFn dequant, int BE, int BB, int64_t n) {
  constexpr int L = Ops::kLanes;
  using V = typename Ops::V;
  const int64_t K = a.K, blocks = K / BE, row_bytes = blocks * BB;
  const auto* w = static_cast<const uint8_t*>(a.w) + n * row_bytes;
  alignas(64) float buf[RN][256];
  V acc[kDirectLaneRows][RN];
  for (int m = 0; m < a.M; ++m)
    for (int r = 0; r < RN; ++r) acc[m][r] = Ops::zero();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int r = 0; r < RN; ++r) dequant(w + r * row_bytes + b * BB, buf[r]);
    for (int c = 0; c < BE; c += L)
      for (int m = 0; m < a.M; ++m) {
        const V x = Ops::load(a.xf + m * K + b * BE + c);
        for (int r = 0; r < RN; ++r) acc[m][r] = Ops::madd(Ops::load(buf[r] + c), x, acc[m][r]);
      }
  }
  for (int m = 0; m < a.M; ++m)
    for (int r = 0; r < RN; ++r) lane_store(a, m, n + r, Ops::sum(acc[m][r]));
}

template <class Ops>
void lane_columns(const RowdotArgs& a, const QuantTier& quant, int64_t n0, int64_t n1) {
  if (a.M <= kDirectLaneRows && sy_dtype_is_blocked(a.wtype)) {
    const DequantBlockFn dequant = dequant_block_of(a.wtype);
    const int BE = int(sy_dtype_block_elements(a.wtype)), BB = int(sy_dtype_block_bytes(a.wtype));
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) lane_block_tile<Ops, 4>(a, dequant, BE, BB, n);
    for (; n < n1; ++n) lane_block_tile<Ops, 1>(a, dequant, BE, BB, n);
    return;
  }
  thread_local std::vector<float> panel;
  if (a.wtype != SY_DTYPE_F32 && panel.size() < size_t(kLanePanelRows * a.K))
    panel.resize(size_t(kLanePanelRows * a.K));
  for (int64_t m0 = 0; m0 < a.M; m0 += kLaneXBlock) {
    const int64_t m1 = std::min(a.M, m0 + kLaneXBlock);
    for (int64_t nb = n0; nb < n1; nb += kLanePanelRows) {
      const int64_t rows = std::min(kLanePanelRows, n1 - nb);
      const float* w = lane_panel(a, quant, nb, rows, panel.data());
      lane_tiles<Ops>(a, w, a.K, rows, nb, m0, m1);
    }
  }
}

inline bool lane_reads_bf16(sy_dtype, bool) {
  return false;
}

}  // namespace
}  // namespace sy::cpu
