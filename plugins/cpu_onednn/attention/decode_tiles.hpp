// The decode attention blocks (attention_blocks.hpp's DecodeBlock), written once over an
// instruction-set description and instantiated by each tier file with its own:
//
//   struct Isa {
//     using V = ...;                          // a vector of W floats
//     static constexpr int W, kScoreKeys, kPvRows, kPvVecs, kPvKeys;  // register tile shapes
//     static constexpr int kBf16Vecs;         // vectors one bf16 load gives: 1, or 2 (below)
//     static V zero(); static V load(const float*); static void store(float*, V);
//     static void load_bf16(const uint16_t*, V* out);  // kBf16Vecs vectors, widened
//     static V fma(V, V, V); static V mul(V, V); static V bcast(const float*);
//     static __m128 sum4(V, V, V, V);         // {Σa, Σb, Σc, Σd}
//   };
//
// kBf16Vecs = 2: one load of 2·W bf16 becomes its even elements and its odd elements (an AND
// and a shift, no shuffle), so the queries and the output are kept in that order within every
// 2·W elements (DecodeKernels::split_group); the caller permutes them once per call.
//
// Everything here has internal linkage, like scalar_math.hpp: each tier file compiled with its
// own instruction set gets its own copy.
//
// Why this shape: decoding reads every K and V row once and does ~2·R flops per element, so the
// blocks must keep the load ports ahead of the cache misses. Scores dot kScoreKeys keys against 4
// query rows at a time (each key vector loaded once, each query vector once per tile); pv keeps a
// tile of kPvRows × kPvVecs outputs in registers over the block's keys, loading each V vector
// once and broadcasting probabilities. bf16 rows are widened to f32 in registers.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "attention/attention_blocks.hpp"
#include "tier/register_tile.hpp"

namespace sy::cpu {
namespace {

// Issues the next `count` line prefetches of a sequential sweep. Spreading a region's
// prefetches over a phase's work, in address order, keeps the line-fill buffers busy without
// bursts (measured on Zen 5: about 0.9 of a plain read's bandwidth, against 0.45 with the
// hardware prefetchers alone — a head's rows are a page apart and each page is read briefly).
inline void sweep_step(const char*& p, int64_t& left, int64_t count) {
  for (; count > 0 && left > 0; --count, --left, p += 64) _mm_prefetch(p, _MM_HINT_T0);
}

inline int64_t per_step(int64_t lines, int64_t steps) {
  return (lines + steps - 1) / steps;
}

// Vectors per load of T: f32 one, bf16 Isa::kBf16Vecs.
template <class Isa, typename T>
inline constexpr int kChunkVecs = sizeof(T) == 4 ? 1 : Isa::kBf16Vecs;

template <class Isa>
inline void load_chunk(const float* p, typename Isa::V* out) {
  out[0] = Isa::load(p);
}
template <class Isa>
inline void load_chunk(const uint16_t* p, typename Isa::V* out) {
  Isa::load_bf16(p, out);
}

// Rows r0..r0+RT-1 of head h against keys j..j+KT-1.
template <class Isa, typename T, int KT, int RT>
inline void decode_scores_tile(const DecodeBlock& b, int j, int h, int r0) {
  using V = typename Isa::V;
  constexpr int CV = kChunkVecs<Isa, T>;
  const T* k = static_cast<const T*>(b.k) + j * b.stride + int64_t(h) * b.D;
  const float* q = b.q + (size_t(h) * b.R + r0) * b.D;
  V acc[4][KT];
  SY_TILE_LOOP
  for (int r = 0; r < 4; ++r) {
    SY_TILE_LOOP
    for (int a = 0; a < KT; ++a) acc[r][a] = Isa::zero();
  }
  for (int e = 0; e < b.D; e += CV * Isa::W) {
    V kv[KT][CV];
    SY_TILE_LOOP
    for (int a = 0; a < KT; ++a) load_chunk<Isa>(k + a * b.stride + e, kv[a]);
    SY_TILE_LOOP
    for (int c = 0; c < CV; ++c) {
      SY_TILE_LOOP
      for (int r = 0; r < RT; ++r) {
        V qv = Isa::load(q + size_t(r) * b.D + e + c * Isa::W);
        SY_TILE_LOOP
        for (int a = 0; a < KT; ++a) acc[r][a] = Isa::fma(qv, kv[a][c], acc[r][a]);
      }
    }
  }
  // Lanes h·R + r0 .. +3: for a last tile of a head the extra lanes belong to the next head,
  // which writes them afterwards (heads go in order), or to the padding after the last head.
  SY_TILE_LOOP
  for (int a = 0; a < KT; ++a)
    _mm_storeu_ps(b.s + size_t(j + a) * b.lanes + h * b.R + r0,
                  Isa::sum4(acc[0][a], acc[1][a], acc[2][a], acc[3][a]));
}

// Every head's rows against keys j..j+KT-1, in tiles of 4 rows and a tail tile.
template <class Isa, typename T, int KT>
inline void decode_scores_keys(const DecodeBlock& b, int j, int h) {
  int r0 = 0;
  for (; r0 + 4 <= b.R; r0 += 4) decode_scores_tile<Isa, T, KT, 4>(b, j, h, r0);
  switch (b.R - r0) {
    case 3: decode_scores_tile<Isa, T, KT, 3>(b, j, h, r0); break;
    case 2: decode_scores_tile<Isa, T, KT, 2>(b, j, h, r0); break;
    case 1: decode_scores_tile<Isa, T, KT, 1>(b, j, h, r0); break;
    default: break;
  }
}

template <class Isa, typename T>
void decode_scores(const DecodeBlock& b) {
  constexpr int KT = Isa::kScoreKeys;
  const char* pf = b.prefetch[0];
  int64_t left = b.prefetch_lines[0];
  const int64_t count = per_step(left, int64_t((b.n + KT - 1) / KT) * b.H);
  int j = 0;
  for (; j + KT <= b.n; j += KT)
    for (int h = 0; h < b.H; ++h) {
      sweep_step(pf, left, count);
      decode_scores_keys<Isa, T, KT>(b, j, h);
    }
  for (; j < b.n; ++j)
    for (int h = 0; h < b.H; ++h) {
      sweep_step(pf, left, count);
      decode_scores_keys<Isa, T, 1>(b, j, h);
    }
}

// Keys [j0, j1) of head h, rows r0.., columns c0..: the running output is scaled by alpha only
// with the block's first keys.
template <class Isa, typename T, int RT, int NV>
inline void decode_pv_tile(const DecodeBlock& b, int j0, int j1, int h, int r0, int c0) {
  using V = typename Isa::V;
  const int lane0 = h * b.R + r0, D = b.D, lanes = b.lanes;
  const int64_t stride = b.stride;
  float* o = b.o + size_t(lane0) * D + c0;
  const T* v = static_cast<const T*>(b.v) + int64_t(h) * D + c0;
  const float* p = b.s + lane0;
  const float one = 1.f;
  V acc[RT][NV];
  SY_TILE_LOOP
  for (int r = 0; r < RT; ++r) {
    V a = Isa::bcast(j0 == 0 ? b.alpha + lane0 + r : &one);
    SY_TILE_LOOP
    for (int x = 0; x < NV; ++x) acc[r][x] = Isa::mul(Isa::load(o + size_t(r) * D + x * Isa::W), a);
  }
  constexpr int CV = kChunkVecs<Isa, T>;
  static_assert(NV % CV == 0, "a column tile holds whole loads");
  for (int j = j0; j < j1; ++j) {
    V vv[NV];
    for (int x = 0; x < NV; x += CV) load_chunk<Isa>(v + j * stride + x * Isa::W, vv + x);
    SY_TILE_LOOP
    for (int r = 0; r < RT; ++r) {
      V pr = Isa::bcast(p + size_t(j) * lanes + r);
      SY_TILE_LOOP
      for (int x = 0; x < NV; ++x) acc[r][x] = Isa::fma(pr, vv[x], acc[r][x]);
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < RT; ++r) {
    SY_TILE_LOOP
    for (int x = 0; x < NV; ++x) Isa::store(o + size_t(r) * D + x * Isa::W, acc[r][x]);
  }
}

template <class Isa, typename T, int RT>
inline void decode_pv_rows(const DecodeBlock& b, int j0, int j1, int h, int r0) {
  constexpr int NV = Isa::kPvVecs;
  int c0 = 0;
  for (; c0 + NV * Isa::W <= b.D; c0 += NV * Isa::W)
    decode_pv_tile<Isa, T, RT, NV>(b, j0, j1, h, r0, c0);
  // D is a multiple of 16 (the envelope): with 8-float vectors, or bf16 loads of 16, the full
  // tiles cover it; 16-float vectors may leave 1 to 3.
  if constexpr (kChunkVecs<Isa, T> == 1 && NV == 4) {
    switch ((b.D - c0) / Isa::W) {
      case 3: decode_pv_tile<Isa, T, RT, 3>(b, j0, j1, h, r0, c0); break;
      case 2: decode_pv_tile<Isa, T, RT, 2>(b, j0, j1, h, r0, c0); break;
      case 1: decode_pv_tile<Isa, T, RT, 1>(b, j0, j1, h, r0, c0); break;
      default: break;
    }
  }
}

template <class Isa, typename T>
void decode_pv(const DecodeBlock& b) {
  constexpr int RT = Isa::kPvRows;
  static_assert(RT == 4, "the row-tail switch below covers tiles of 4 rows");
  // A few keys at a time for every head, so V is read nearly in address order, as K is.
  constexpr int step = Isa::kPvKeys;
  const char* pf = b.prefetch[1];
  int64_t left = b.prefetch_lines[1];
  const int64_t count = per_step(left, int64_t((b.n + step - 1) / step) * b.H);
  for (int j0 = 0; j0 < b.n; j0 += step) {
    const int j1 = std::min(b.n, j0 + step);
    for (int h = 0; h < b.H; ++h) {
      sweep_step(pf, left, count);
      int r0 = 0;
      for (; r0 + RT <= b.R; r0 += RT) decode_pv_rows<Isa, T, RT>(b, j0, j1, h, r0);
      switch (b.R - r0) {
        case 3: decode_pv_rows<Isa, T, 3>(b, j0, j1, h, r0); break;
        case 2: decode_pv_rows<Isa, T, 2>(b, j0, j1, h, r0); break;
        case 1: decode_pv_rows<Isa, T, 1>(b, j0, j1, h, r0); break;
        default: break;
      }
    }
  }
}

template <class Isa>
DecodeKernels decode_kernels_of(const char* f32_name, const char* bf16_name, bool bf16) {
  if (bf16)
    return {bf16_name, decode_scores<Isa, uint16_t>, decode_pv<Isa, uint16_t>,
            Isa::kBf16Vecs == 2 ? 2 * Isa::W : 0};
  return {f32_name, decode_scores<Isa, float>, decode_pv<Isa, float>, 0};
}

}  // namespace
}  // namespace sy::cpu
