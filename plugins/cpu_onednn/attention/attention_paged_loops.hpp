// The loops of attention_paged.hpp over a tier's lanes (simd_lanes.hpp), compiled per tier
// (attention_paged_portable.cpp, _avx2.cpp, _avx512.cpp). Internal linkage (scalar_math.hpp
// says why).
//
// What keeps a row's result independent of its company: every multiply-add over lanes is an
// Ops call; the per-key steps run over all L lanes of a group whatever the row sees of it (one
// loop shape, so one compiled body), the lanes it does not see masked to −inf by selection; sums
// over keys run in key order or by Ops' halving.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "attention/attention_paged.hpp"
#include "tier/register_tile.hpp"
#include "tier/scalar_math.hpp"
#include "tier/simd_lanes.hpp"

namespace sy::cpu {
namespace {

inline int64_t padded(int64_t D, int lanes) {
  return (D + lanes - 1) / lanes * lanes;
}

// `count` elements (f32 or bf16) at p as f32 at out.
inline void widen_row(const void* p, bool bf16, int64_t count, float* out) {
  if (bf16) {
    const bf16_bits* b = static_cast<const bf16_bits*>(p);
    for (int64_t i = 0; i < count; ++i) out[i] = to_f32(b[i]);
  } else {
    std::memcpy(out, p, size_t(count) * sizeof(float));
  }
}

// Up to kTile chunks of L floats in registers: the row's q (scores) or its output (P·V) over a
// tile of D, so each multiply-add loads one operand, not two (the loads bound these loops).
inline constexpr int kTile = 8;

// Scores of the group's L keys over chunks [c0, c0 + C) of d: acc[j] continues each key's one
// chain. Every lane is computed, seen or not (k[j] is some row of the group for each), so that
// the loops have compile-time bounds and acc stays in registers; the caller drops the unseen.
template <class Ops, int C>
inline void scores_tile(const float* q, const float* const* k, int64_t d0, typename Ops::V* acc) {
  constexpr int L = Ops::kLanes;
  typename Ops::V qv[C];
  SY_TILE_LOOP
  for (int c = 0; c < C; ++c) qv[c] = Ops::load(q + d0 + c * L);
  SY_TILE_LOOP
  for (int j = 0; j < L; ++j) {
    typename Ops::V a = acc[j];
    SY_TILE_LOOP
    for (int c = 0; c < C; ++c) a = Ops::madd(qv[c], Ops::load(k[j] + d0 + c * L), a);
    acc[j] = a;
  }
}

// Rows o_r[d0 .. d0 + C·L) · α_r + Σ p_rj · v_j for R rows that see the same keys [lo, hi], key
// by key in order (row r's p at p + r·L, its o at o + r·Dp): each chunk of v_j is loaded once for
// the R rows, whose R·C chains fill the multiply-adds' latency where one row's C would not (a
// head of 64 is 4 chains of 16 keys on AVX-512). A row's chain is the one it has alone.
template <class Ops, int R, int C>
inline void values_tile(const float* p, const float* const* v, int lo, int hi, int64_t d0,
                        const float* alpha, int64_t Dp, float* o) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  V out[R][C];
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    const V scale = Ops::set1(alpha[r]);
    SY_TILE_LOOP
    for (int c = 0; c < C; ++c) out[r][c] = Ops::mul(Ops::load(o + r * Dp + d0 + c * L), scale);
  }
  for (int j = lo; j <= hi; ++j) {
    V pj[R];
    SY_TILE_LOOP
    for (int r = 0; r < R; ++r) pj[r] = Ops::set1(p[r * L + j]);
    SY_TILE_LOOP
    for (int c = 0; c < C; ++c) {
      const V vj = Ops::load(v[j] + d0 + c * L);
      SY_TILE_LOOP
      for (int r = 0; r < R; ++r) out[r][c] = Ops::madd(pj[r], vj, out[r][c]);
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    SY_TILE_LOOP
    for (int c = 0; c < C; ++c) Ops::store(o + r * Dp + d0 + c * L, out[r][c]);
  }
}

// The L keys' sums for a head of one tile (C chunks: every tier's D = 64 and 128): scores_tile
// on accumulators local to this function, so that they stay in registers.
template <class Ops, int C>
inline typename Ops::V scores_one_tile(const float* q, const float* const* k) {
  typename Ops::V acc[Ops::kLanes];
  SY_TILE_LOOP
  for (int j = 0; j < Ops::kLanes; ++j) acc[j] = Ops::zero();
  scores_tile<Ops, C>(q, k, 0, acc);
  return Ops::sum_each(acc);
}

// f<C>(d0) for the last `rest` chunks (0 < rest < T), C known at compile time.
template <int C, class F>
inline void tail_tile(int rest, int64_t d0, F& f) {
  if constexpr (C > 0) {
    if (rest == C) return f.template operator()<C>(d0);
    tail_tile<C - 1>(rest, d0, f);
  }
}

// f<C>(d0) over Dp (a whole number of chunks of L) in tiles of T chunks, in order.
template <int T = kTile, class F>
inline void over_tiles(int64_t Dp, int L, F&& f) {
  int64_t d0 = 0;
  for (; d0 + int64_t(T) * L <= Dp; d0 += int64_t(T) * L) f.template operator()<T>(d0);
  tail_tile<T - 1>(int((Dp - d0) / L), d0, f);
}

// One row's scores over the keys [lo, hi] of a group of L keys (lane l = key j0 + l; k[l] its
// row, Dp floats). Each score is q · k over d in lanes (chunk after chunk, one accumulator), its
// lanes summed by Ops::sum_each's fixed tree, times the scale, then softcap (through s [L]); the
// lanes the row does not see are −inf (computed from another key's row, then dropped: never from
// past the keys, as the pool is not zeroed). Tiling D changes no element's chain of operations,
// only where its operands wait.
template <class Ops>
inline typename Ops::V row_scores(const PagedAttentionArgs& a, const float* q,
                                  const float* const* k, int lo, int hi, int64_t Dp, float* s) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  V sums = Ops::zero();            // always set below; GCC cannot tell
  if (Dp <= int64_t(kTile) * L) {  // one tile
    over_tiles(Dp, L, [&]<int C>(int64_t) { sums = scores_one_tile<Ops, C>(q, k); });
  } else {
    V acc[L];
    for (int j = 0; j < L; ++j) acc[j] = Ops::zero();
    over_tiles(Dp, L, [&]<int C>(int64_t d0) { scores_tile<Ops, C>(q, k, d0, acc); });
    sums = Ops::sum_each(acc);
  }
  V scores = Ops::mul(sums, Ops::set1(a.scale));
  if (a.softcap > 0.f) {  // tanh lane by lane (Gemma 2); without it the lanes stay in registers
    Ops::store(s, scores);
    for (int i = 0; i < L; ++i) s[i] = a.softcap * std::tanh(s[i] / a.softcap);
    scores = Ops::load(s);
  }
  return Ops::keep(scores, lo, hi);
}

// The scalar steps of a row's online softmax, each one compiled body (noinline) for every row
// whatever its company, so that no caller's inlining can fuse them otherwise: α = e^(m − m') for
// the row's o, and its running sum l·α + Σp.
[[maybe_unused]] __attribute__((noinline)) float online_alpha(float m, float m_new) {
  // Most groups leave the maximum where it was: e^0 is 1 exactly, as exp_f32 gives it, without
  // its chain of a dozen dependent steps. The first group gives 0 (m = −inf, m' finite).
  const float x = m - m_new;
  return x == 0.f ? 1.f : exp_f32(x);
}
[[maybe_unused]] __attribute__((noinline)) float online_sum(float l, float alpha, float p_sum) {
  return l * alpha + p_sum;
}

// The most rows one call of rows_group takes (a token's heads of a GQA group are 3 in SmolLM2).
// Measured on an AMX Xeon, SmolLM2's 1703-token prefill: 4 rows against 2 took 14 % off the avx2
// tier's attention; 8 were no quicker than 4 on avx2 or avx512.
inline constexpr int kGroupRows = 4;

// Chunks per value tile for R rows: R·C accumulators, with R broadcasts and a load beside them,
// within the registers a tier has (32 on AVX-512: 16 accumulators; 16 on AVX2: 8). The portable
// tier's vectors are pairs of SSE registers and spill at any R, as they did one row at a time.
template <class Ops, int R>
inline constexpr int kValueTile = std::max(1, std::min(kTile, (Ops::kLanes == 16 ? 16 : 8) / R));

// R rows (q, m, l, o at stride Dp) that see the same keys [lo, hi] of a group: each step of the
// online softmax (the group's maximum, m' and p, then α and l) for all R rows before the next, so
// that the rows' chains of dependent steps run side by side, then their values together
// (values_tile). A row's operations are those it has alone.
template <class Ops, int R>
void rows_group(const PagedAttentionArgs& a, const float* q, const float* const* k,
                const float* const* v, int lo, int hi, int64_t Dp, float* m, float* l, float* o) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  alignas(64) float s[R * L];
  V scores[R];
  for (int r = 0; r < R; ++r) scores[r] = row_scores<Ops>(a, q + r * Dp, k, lo, hi, Dp, s + r * L);
  float m_new[R], p_sum[R], alpha[R];
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) m_new[r] = std::max(m[r], Ops::max_lanes(scores[r]));
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    const V p = Ops::exp(Ops::sub(scores[r], Ops::set1(m_new[r])));  // unseen lanes: exactly 0
    Ops::store(s + r * L, p);
    p_sum[r] = Ops::sum(p);
  }
  for (int r = 0; r < R; ++r) {
    alpha[r] = online_alpha(m[r], m_new[r]);
    l[r] = online_sum(l[r], alpha[r], p_sum[r]);
    m[r] = m_new[r];
  }
  over_tiles<kValueTile<Ops, R>>(
      Dp, L, [&]<int C>(int64_t d0) { values_tile<Ops, R, C>(s, v, lo, hi, d0, alpha, Dp, o); });
}

// rows_group for n (1 ≤ n ≤ kGroupRows) rows, R known at compile time.
template <class Ops, int R = kGroupRows>
inline void rows_group_n(int n, const PagedAttentionArgs& a, const float* q, const float* const* k,
                         const float* const* v, int lo, int hi, int64_t Dp, float* m, float* l,
                         float* o) {
  if constexpr (R > 1) {
    if (n < R) return rows_group_n<Ops, R - 1>(n, a, q, k, v, lo, hi, Dp, m, l, o);
  }
  rows_group<Ops, R>(a, q, k, v, lo, hi, Dp, m, l, o);
}

// The keys [lo, hi] query row t of the item sees: causal to its position (its sequence's last
// q_len positions of L), back to the window.
inline void visible_keys(const PagedAttentionArgs& a, const PagedItem& it, int64_t t, int64_t& lo,
                         int64_t& hi) {
  const int64_t pos = it.L - it.q_len + t;
  hi = a.causal ? std::min(pos, it.L - 1) : it.L - 1;
  lo = a.window >= 0 ? std::max<int64_t>(0, pos - a.window) : 0;
}

// The row's o / (l + e^(sink − m)) into o (q's dtype) and its lse.
inline void finish_row(const PagedAttentionArgs& a, int64_t token, int64_t head, float m, float l,
                       const float* acc) {
  const float* sinks = a.sinks;
  const bool any = l > 0.f;
  const float denom = any && sinks ? l + exp_f32(sinks[head] - m) : l;
  const int64_t at = (token * a.Hq + head) * a.D;
  for (int64_t d = 0; d < a.D; ++d) {
    const float v = any ? acc[d] / denom : 0.f;
    if (a.bf16)
      static_cast<bf16_bits*>(a.o)[at + d] = from_f32<bf16_bits>(v);
    else
      static_cast<float*>(a.o)[at + d] = v;
  }
  if (a.lse)
    a.lse[head * a.T + token] = any ? m + std::log(l) : -std::numeric_limits<float>::infinity();
}

// A row's total (tm, tl, to) with the state (m, l, o) of its next chunk of keys folded in. Every
// fold goes through this one compiled function (noinline), whether a thread takes a row's chunks
// in turn or the partials of a split are folded afterwards, so both give the same bits.
template <class Ops>
__attribute__((noinline)) void paged_fold(float m, float l, const float* o, int64_t Dp, float& tm,
                                          float& tl, float* to) {
  constexpr int L = Ops::kLanes;
  if (l == 0.f) return;  // the row sees none of the chunk's keys
  if (tl == 0.f) {
    tm = m, tl = l;
    std::memcpy(to, o, size_t(Dp) * sizeof(float));
    return;
  }
  const float m_new = std::max(tm, m);
  const float alpha = exp_f32(tm - m_new), beta = exp_f32(m - m_new);
  tl = tl * alpha + l * beta;
  tm = m_new;
  const typename Ops::V va = Ops::set1(alpha), vb = Ops::set1(beta);
  for (int64_t d = 0; d < Dp; d += L)
    Ops::store(to + d, Ops::madd(vb, Ops::load(o + d), Ops::mul(Ops::load(to + d), va)));
}

// The key pointers of group j0's lanes for KV head hk + h of the item (lane l = key j0 + l, its
// row of the item's first head at[l]): in place where f32 rows are a whole number of lanes long,
// else widened or padded into kb, vb (the same values: the pads are zeros). Lanes outside
// [first, last] read the first key's rows: row_scores scores every lane and drops those.
template <int L>
inline void group_rows(const PagedAttentionArgs& a, const PagedScratch& w, const int64_t* at,
                       int lo, int hi, int64_t h, const float** k, const float** v) {
  const int64_t Dp = padded(a.D, L);
  const size_t esize = a.bf16 ? 2 : 4;
  const bool in_place = !a.bf16 && Dp == a.D;
  for (int l = lo; l <= hi; ++l) {
    const int64_t row = at[l] + h * a.D;
    if (in_place) {
      k[l] = static_cast<const float*>(a.k_pool) + row;
      v[l] = static_cast<const float*>(a.v_pool) + row;
    } else {
      widen_row(static_cast<const char*>(a.k_pool) + row * esize, a.bf16, a.D, w.kb + l * Dp);
      widen_row(static_cast<const char*>(a.v_pool) + row * esize, a.bf16, a.D, w.vb + l * Dp);
      k[l] = w.kb + l * Dp;
      v[l] = w.vb + l * Dp;
    }
  }
  for (int l = 0; l < L; ++l)
    if (l < lo || l > hi) k[l] = k[lo], v[l] = v[lo];
}

// Keys [k0, k1] (within one chunk) for the item's rows, from each row's chunk state in w.m, w.l,
// w.o: groups of L keys aligned to absolute positions, the keys some row sees in each (never
// past the sequence's length: the pool is not zeroed), each group KV head by KV head.
template <class Ops>
void paged_chunk(const PagedAttentionArgs& a, const PagedItem& it, const PagedScratch& w,
                 int64_t rows, int64_t k0, int64_t k1) {
  constexpr int L = Ops::kLanes;
  const int64_t Dp = padded(a.D, L), BS = a.BS, kv_row = a.Hkv * a.D;
  const int64_t per_kv_head = rows / it.hk_count;
  const size_t esize = a.bf16 ? 2 : 4;
  const int64_t span = it.hk_count * a.D * int64_t(esize);  // a key's bytes of the item
  const float *k[L], *v[L];
  int64_t at[L];
  for (int64_t g = k0 / L; g <= k1 / L; ++g) {
    const int64_t j0 = g * L, first = std::max(k0, j0), last = std::min(k1, j0 + L - 1);
    // Key j's row (of the item's first head): block j / BS of the table, row j % BS, walked
    // without a division per key (two 64-bit divisions per key and its prefetch cost more than
    // its products).
    int64_t block = first / BS, in_block = first % BS;
    const auto next_row = [&] {
      const int64_t row = (int64_t(it.table[block]) * BS + in_block) * kv_row + it.hk * a.D;
      if (++in_block == BS) in_block = 0, ++block;
      return row;
    };
    for (int64_t j = first; j <= last; ++j) at[j - j0] = next_row();
    // The next group's rows, ahead of their use, where the item takes some of the KV heads:
    // its rows are then short runs a stride apart (the pool interleaves the heads), which the
    // hardware prefetchers follow poorly. An item of every head (one KV head of one: an MQA
    // model's every item) reads each group's rows of the pool whole, which they follow, and the
    // prefetches only held up its loads (AMX Xeon, SmolLM2 decode at depth 2048: 75 tokens/s
    // with them, 83-93 without; docs/cpu-tiers.md).
    const int64_t ahead = it.hk_count < a.Hkv ? std::min(k1, last + L) : last;
    for (int64_t j = last + 1; j <= ahead; ++j) {
      const int64_t row = next_row();
      const char* kr = static_cast<const char*>(a.k_pool) + row * esize;
      const char* vr = static_cast<const char*>(a.v_pool) + row * esize;
      for (int64_t b = 0; b < span; b += 128) {  // the pairs' adjacent lines come with them
        __builtin_prefetch(kr + b, 0, 3);
        __builtin_prefetch(vr + b, 0, 3);
      }
    }
    for (int64_t h = 0; h < it.hk_count; ++h) {
      group_rows<L>(a, w, at, int(first - j0), int(last - j0), h, k, v);
      // This head's rows in runs that see the same keys of the group (a token's heads; every
      // row whose range covers the group), up to kGroupRows at a time.
      const auto seen = [&](int64_t r) {
        return std::pair{std::max(w.range[2 * r], j0), std::min(w.range[2 * r + 1], j0 + L - 1)};
      };
      const int64_t end = (h + 1) * per_kv_head;
      for (int64_t r = h * per_kv_head; r < end;) {
        const auto [lo, hi] = seen(r);
        int n = 1;
        while (n < kGroupRows && r + n < end && seen(r + n) == std::pair{lo, hi}) ++n;
        if (lo <= hi)
          rows_group_n<Ops>(n, a, w.q + r * Dp, k, v, int(lo - j0), int(hi - j0), Dp, w.m + r,
                            w.l + r, w.o + r * Dp);
        r += n;
      }
    }
  }
}

template <class Ops>
void paged_rows(const PagedAttentionArgs& a, const PagedItem& it, const PagedScratch& w) {
  constexpr int L = Ops::kLanes;
  const int64_t Dp = padded(a.D, L), rows = paged_item_rows(it);
  const size_t esize = a.bf16 ? 2 : 4;
  int64_t lo_all = it.L, hi_all = -1;
  for (int64_t r = 0; r < rows; ++r) {
    const PagedRow row = paged_row(a, it, r);
    int64_t lo, hi;
    visible_keys(a, it, row.t, lo, hi);
    w.range[2 * r] = lo;
    w.range[2 * r + 1] = hi;
    lo_all = std::min(lo_all, lo);
    hi_all = std::max(hi_all, hi);
    const char* q =
        static_cast<const char*>(a.q) + ((it.first + row.t) * a.Hq + row.head) * a.D * esize;
    widen_row(q, a.bf16, a.D, w.q + r * Dp);
    w.tm[r] = -std::numeric_limits<float>::infinity();
    w.tl[r] = 0.f;
  }
  int64_t c0 = lo_all / kKeyChunk, c1 = hi_all / kKeyChunk;
  if (it.partial) c0 = c1 = it.chunk;
  for (int64_t c = c0; hi_all >= lo_all && c <= c1; ++c) {
    const int64_t k0 = std::max(lo_all, c * kKeyChunk),
                  k1 = std::min(hi_all, (c + 1) * kKeyChunk - 1);
    if (k0 > k1) continue;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(w.o + r * Dp, w.o + (r + 1) * Dp, 0.f);
      w.m[r] = -std::numeric_limits<float>::infinity();
      w.l[r] = 0.f;
    }
    paged_chunk<Ops>(a, it, w, rows, k0, k1);
    for (int64_t r = 0; r < rows; ++r)
      paged_fold<Ops>(w.m[r], w.l[r], w.o + r * Dp, Dp, w.tm[r], w.tl[r], w.to + r * Dp);
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (it.partial) {
      float* p = it.partial + r * paged_partial_floats(Dp);
      p[0] = w.tm[r], p[1] = w.tl[r];
      if (w.tl[r] != 0.f) std::memcpy(p + 2, w.to + r * Dp, size_t(Dp) * sizeof(float));
      continue;
    }
    const PagedRow row = paged_row(a, it, r);
    finish_row(a, it.first + row.t, row.head, w.tm[r], w.tl[r], w.to + r * Dp);
  }
}

// The rows of items [0, count), one item's rows split by key chunk, their partials folded in
// chunk order (paged_fold, as paged_rows folds its chunks), then finished.
template <class Ops>
void paged_combine(const PagedAttentionArgs& a, const PagedItem* items, int64_t count,
                   const PagedScratch& w) {
  const PagedItem& it = items[0];
  const int64_t Dp = padded(a.D, Ops::kLanes), rows = paged_item_rows(it);
  for (int64_t r = 0; r < rows; ++r) {
    w.tm[r] = -std::numeric_limits<float>::infinity();
    w.tl[r] = 0.f;
    for (int64_t i = 0; i < count; ++i) {
      const float* p = items[i].partial + r * paged_partial_floats(Dp);
      paged_fold<Ops>(p[0], p[1], p + 2, Dp, w.tm[r], w.tl[r], w.to + r * Dp);
    }
    const PagedRow row = paged_row(a, it, r);
    finish_row(a, it.first + row.t, row.head, w.tm[r], w.tl[r], w.to + r * Dp);
  }
}

template <class Ops>
PagedAttentionTier make_paged_tier(const char* name) {
  return {name, Ops::kLanes, paged_rows<Ops>, nullptr, paged_combine<Ops>};
}

}  // namespace
}  // namespace sy::cpu
