// Many rows of x (prefill) of rowdot_q8.hpp on AVX2: 8 weight rows at a time are widened to 16
// bits once per call into a panel that interleaves them (a lane is a row), then every row of x
// runs against that panel. A row's block sum then accumulates lane-wise, one pmaddwd and one add
// per pair of activations for all 8 rows, with no horizontal sum per block, and the widening and
// the scales are paid once per 8 weight rows instead of once per row of x. The 8-row form
// (rowdot_q8_rows8_avx2.hpp) pays both per row of x, and the 4-row form's two 8-bit digits double
// the products. Weights stay in the file's layout: the panel is the thread's scratch.
// Two panels (16 weight rows) run at once against 4 rows of x, so a multiply-accumulate costs
// half a weight load and a quarter of a broadcast, and the next two panels' bytes are fetched
// into L2 while these are multiplied.
//
// The arithmetic per output is the 8-row form's: the exact integer Σ of a block (a weight offset
// such as q4_0's −8 is taken off the widened weights here, off the sums there: the same
// integers), then acc = fma(float(Σ), w_scale · d, acc) (q6_k: its two halves in turn),
// off = fma(offset, s, off), the result acc + off. So a row's result does not depend on how many
// rows its step has (Tiers/BatchInvariance.MatmulQ16RowsDoNotDependOnTheirCompany).
// Shared by the avx2, vnni and amx files (each compiles it with its own flags). Internal linkage.
#pragma once

#include "rowdot/rowdot_q8_rows8_avx2.hpp"
#include "tier/tier_scratch.hpp"

namespace sy::cpu {
namespace {

// 8 weight rows of K/32 blocks, interleaved: per block 16 vectors, vector j holding the 16-bit
// elements 2j and 2j + 1 of each row (lane r: row r), then the rows' scales (s1: q6_k's second
// half-block's) and offsets. A thread's two panels (Q16Panels) interleave vector by vector, so
// that vector j of both, and their scales, are each one 64-byte run: a 512-bit form reads 16
// weight rows as one register (rowdot_q8_vnni.hpp).
struct Q16Panel {
  __m256i* w_;
  __m256* s_;
  int64_t blocks_;
  __m256i* w(int64_t b, int j) const { return w_ + 2 * (16 * b + j); }
  __m256& s0(int64_t b) const { return s_[2 * b]; }
  __m256& s1(int64_t b) const { return s_[2 * (blocks_ + b)]; }
  __m256& coeff(int64_t b) const { return s_[2 * (2 * blocks_ + b)]; }
};

// This thread's two panels (16 weight rows) for rows of `blocks` blocks (tier_scratch: a tier
// file keeps no container of its own; 64-byte aligned).
struct Q16Panels {
  Q16Panel p[2];
  explicit Q16Panels(int64_t blocks) {
    auto* w = static_cast<__m256i*>(
        tier_scratch(ScratchSlot::q16_panel, sizeof(__m256i) * size_t(2 * 19 * blocks)));
    auto* s = reinterpret_cast<__m256*>(w + 2 * 16 * blocks);
    p[0] = {w, s, blocks};
    p[1] = {w + 1, s + 1, blocks};
  }
};

// v[r] (8 lanes of 32 bits each) becomes v[j] holding lane j of every input, lane r from v[r].
inline void transpose8x32(__m256i (&v)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // rows 4i..4i+3: u[4i + k] holds their lane k (and k + 4)
    u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
    v[k + 4] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
  }
}

// Weight rows [0, 8) at w (row_bytes apart) into p.
template <class D>
void q16_panel_fill(const uint8_t* w, int64_t row_bytes, int64_t blocks, Q16Panel& p) {
  RowScales8<D> scales(w, row_bytes, blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i lo[8], hi[8];
    for (int r = 0; r < 8; ++r) {
      Wide16<D>::at(w + r * row_bytes, b, lo[r], hi[r]);
      if constexpr (Wide16<D>::kBias != 0) {
        const __m256i bias = _mm256_set1_epi16(Wide16<D>::kBias);
        lo[r] = _mm256_sub_epi16(lo[r], bias), hi[r] = _mm256_sub_epi16(hi[r], bias);
      }
    }
    transpose8x32(lo);
    transpose8x32(hi);
    for (int j = 0; j < 8; ++j)
      _mm256_store_si256(p.w(b, j), lo[j]), _mm256_store_si256(p.w(b, 8 + j), hi[j]);
    scales.at(b, p.s0(b), p.s1(b), p.coeff(b));
  }
}

// Σ over activation pairs [j0, j1) of a block of RX rows of x against NP panels' block b. Each
// pair of x is broadcast once for the NP panels, each weight vector loaded once for the RX rows:
// a multiply-accumulate costs a load or a broadcast 1/NP + 1/RX of the time.
template <class Mac, int NP, int RX>
inline void q16_panel_sums(const Q16Panel* p, int64_t b, const Q16Block* const (&xb)[RX], int j0,
                           int j1, __m256i (&sum)[NP][RX]) {
  for (int k = 0; k < NP; ++k)
    for (int m = 0; m < RX; ++m) sum[k][m] = _mm256_setzero_si256();
  for (int j = j0; j < j1; ++j) {
    __m256i w[NP];
    for (int k = 0; k < NP; ++k) w[k] = _mm256_load_si256(p[k].w(b, j));
    for (int m = 0; m < RX; ++m) {
      int32_t pair;
      std::memcpy(&pair, xb[m]->q + 2 * j, sizeof pair);
      const __m256i q = _mm256_set1_epi32(pair);
      for (int k = 0; k < NP; ++k) sum[k][m] = Mac::accumulate(sum[k][m], w[k], q);
    }
  }
}

// The weight bytes the next panels will be filled from, fetched into L2 a share per block while
// the current ones are multiplied: the fill reads a run of a few KiB in a burst after a long
// stretch without loads from it, which the hardware prefetchers do not run ahead of.
struct PanelAhead {
  const uint8_t* bytes = nullptr;  // none: the last panels of the call
  int64_t per_block = 0;

  void fetch(int64_t b) const {
    if (!bytes) return;
    for (int64_t o = 0; o < per_block; o += 64)
      _mm_prefetch(bytes + b * per_block + o, _MM_HINT_T1);
  }
};

// Rows [m, m + RX) of x against NP panels of weight rows [n, n + 8·NP): y[m..m+RX)[n..n+8·NP).
template <class D, class Mac, int NP, int RX>
void q16_panel_rows(const RowdotQ8Args& a, const Q16Panel* p, int64_t n, int64_t m,
                    PanelAhead ahead) {
  const int64_t blocks = a.K / 32;
  __m256 acc[NP][RX], off[NP][RX];
  for (int k = 0; k < NP; ++k)
    for (int i = 0; i < RX; ++i) acc[k][i] = _mm256_setzero_ps(), off[k][i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const Q16Block* xb[RX];
    for (int i = 0; i < RX; ++i) xb[i] = a.xq + (m + i) * blocks + b;
    ahead.fetch(b);
    __m256i sum[NP][RX];
    q16_panel_sums<Mac, NP, RX>(p, b, xb, 0, D::kHalves ? 8 : 16, sum);
    for (int k = 0; k < NP; ++k)
      for (int i = 0; i < RX; ++i)
        acc[k][i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[k][i]),
                                    _mm256_mul_ps(p[k].s0(b), _mm256_set1_ps(xb[i]->d)), acc[k][i]);
    if constexpr (D::kHalves) {
      q16_panel_sums<Mac, NP, RX>(p, b, xb, 8, 16, sum);
      for (int k = 0; k < NP; ++k)
        for (int i = 0; i < RX; ++i)
          acc[k][i] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[k][i]),
                              _mm256_mul_ps(p[k].s1(b), _mm256_set1_ps(xb[i]->d)), acc[k][i]);
    }
    if constexpr (D::kOffset)
      for (int k = 0; k < NP; ++k)
        for (int i = 0; i < RX; ++i)
          off[k][i] = _mm256_fmadd_ps(p[k].coeff(b), _mm256_set1_ps(xb[i]->s), off[k][i]);
  }
  for (int k = 0; k < NP; ++k)
    for (int i = 0; i < RX; ++i) {
      alignas(32) float out[8];
      _mm256_store_ps(out, _mm256_add_ps(acc[k][i], off[k][i]));
      q8_store8(a, m + i, n + 8 * k, out);
    }
}

// Every row of x against NP filled panels of weight rows [n, n + 8·NP): 4 rows of x at a time,
// then one by one; the first pass fetches `ahead`.
// A Mac with a 512-bit form of two panels (Mac::kTwoPanelsWide) takes NP = 2 there.
template <class D, class Mac, int NP>
void q16_panels_against_x(const RowdotQ8Args& a, const Q16Panel* p, int64_t n, PanelAhead ahead) {
  int64_t m = 0;
  if constexpr (NP == 2 && requires { Mac::kTwoPanelsWide; }) {
    for (; m + 8 <= a.M; m += 8, ahead = {}) Mac::template two_panels<D, 8>(a, p, n, m, ahead);
    for (; m + 4 <= a.M; m += 4, ahead = {}) Mac::template two_panels<D, 4>(a, p, n, m, ahead);
    for (; m < a.M; ++m, ahead = {}) Mac::template two_panels<D, 1>(a, p, n, m, ahead);
    return;
  }
  for (; m + 4 <= a.M; m += 4, ahead = {}) q16_panel_rows<D, Mac, NP, 4>(a, p, n, m, ahead);
  for (; m < a.M; ++m, ahead = {}) q16_panel_rows<D, Mac, NP, 1>(a, p, n, m, ahead);
}

// While rows [n, n + 16) of [n0, n1) are multiplied: the next 16 rows' `run` bytes at `next`
// (stored rows and packed groups alike are one run per 16 rows).
inline PanelAhead panel_ahead(const uint8_t* next, int64_t n, int64_t n1, int64_t run,
                              int64_t blocks) {
  if (n + 32 > n1) return {};
  return {next, run / blocks};
}

// Weight rows [n0, n) against every row of x through panels, 16 rows at a time (then 8), each
// 8 rows' `bytes8` bytes from w + n·bytes8/8 filled by fill(src, panel); returns n, the first
// row after the last whole 8 (stored rows and packed groups alike are one run per 8 rows).
template <class D, class Mac, class Fill>
int64_t q16_panels_over(const RowdotQ8Args& a, const uint8_t* w, int64_t bytes8, int64_t n0,
                        int64_t n1, Fill fill) {
  const auto src = [&](int64_t n) { return w + n * bytes8 / 8; };
  Q16Panels panels(a.K / 32);
  int64_t n = n0;
  for (; n + 16 <= n1; n += 16) {
    fill(src(n), panels.p[0]);
    fill(src(n + 8), panels.p[1]);
    q16_panels_against_x<D, Mac, 2>(a, panels.p, n,
                                    panel_ahead(src(n + 16), n, n1, 2 * bytes8, a.K / 32));
  }
  for (; n + 8 <= n1; n += 8) {
    fill(src(n), panels.p[0]);
    q16_panels_against_x<D, Mac, 1>(a, panels.p, n, {});
  }
  return n;
}

// Weight rows [n0, n1) against every row of x: each 8 rows through a panel, 4 rows of x at a time
// (then one by one); the last n1 − n0 mod 8 rows through the 4-row form, whose arithmetic per
// output is the same.
template <class Ops, class D, class Mac>
void q16_panel_columns(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  const int64_t row_bytes = a.K / sy_dtype_block_elements(a.wtype) * sy_dtype_block_bytes(a.wtype);
  const int64_t n = q16_panels_over<D, Mac>(
      a, static_cast<const uint8_t*>(a.w), 8 * row_bytes, n0, n1,
      [&](const uint8_t* src, Q16Panel& p) { q16_panel_fill<D>(src, row_bytes, a.K / 32, p); });
  if (n < n1) q8_columns_of<Ops, D>(a, n, n1);
}

// ---- weights packed 8 rows interleaved (weight_layout.hpp) ------------------------------------
// The same integers and the same float steps per output as the stored forms above (the exact Σ
// of a block, less kBias·ΣQ, then acc = fma(float(Σ), scale · d, acc), off = fma(offset, s,
// off), the result acc + off), so the results equal theirs bit for bit; only the loads differ: a
// chunk widened is already a pair of each row per lane, so there is no shuffle, no horizontal
// sum and no gather of scales.

// How a type's packed group reads (D: its stored decoder), in units of kUnitBlocks blocks and
// kUnitBytes bytes: block(group, b), the bytes of block b that pairs(blk, f) reads, which calls
// f(j, v) for the 16 vectors v holding every row's elements (2j, 2j + 1), one row per 32-bit lane;
// scale(group, b) and offset(group, b), the 8 rows' (lane r: row r's); kBias, what the widened
// values exceed D's integers by (taken off the sums as kBias·ΣQ).
template <class D>
struct Rows8Packed;

// The 8 f16 at p as f32 lanes.
inline __m256 rows8_halves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8 bytes at p, unsigned (Signed: signed), as f32 lanes.
template <bool Signed>
inline __m256 bytes8_ps(const uint8_t* p) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
}

// A type whose unit is one block of kBytes, led by the 8 rows' f16 scales (then offsets).
template <int64_t kBytes>
struct Rows8PerBlock {
  static constexpr int64_t kUnitBlocks = 1, kUnitBytes = kBytes;
  static const uint8_t* block(const uint8_t* group, int64_t b) { return group + b * kBytes; }
  static __m256 scale(const uint8_t* group, int64_t b) { return rows8_halves(block(group, b)); }
  static __m256 offset(const uint8_t* group, int64_t b) {
    return rows8_halves(block(group, b) + 16);
  }
};

// A super-block type's unit: kHead bytes of the 8 rows' f16 factors, then 8 blocks of kSub bytes.
template <int64_t kHead, int64_t kSub>
struct Rows8Super {
  static constexpr int64_t kUnitBlocks = 8, kUnitBytes = kHead + 8 * kSub;
  static const uint8_t* unit(const uint8_t* group, int64_t b) { return group + b / 8 * kUnitBytes; }
  static const uint8_t* block(const uint8_t* group, int64_t b) {
    return unit(group, b) + kHead + b % 8 * kSub;
  }
  // The 8 rows' f16 factor at byte `head` of the unit times their bytes at byte `at` of block b
  // (signed or not): a block's scale (or offset) as the stored forms compute it.
  template <bool Signed>
  static __m256 factor_times(const uint8_t* group, int64_t b, int head, int at) {
    return _mm256_mul_ps(rows8_halves(unit(group, b) + head),
                         bytes8_ps<Signed>(block(group, b) + at));
  }
};

// Where the bytes of block b of a group lie, roughly (the unit's bytes spread evenly over its
// blocks), and how many per block: for prefetching a run of blocks ahead.
template <class P>
inline const uint8_t* rows8_ahead(const uint8_t* group, int64_t b) {
  return group + b * P::kUnitBytes / P::kUnitBlocks;
}
template <class P>
inline constexpr int64_t kRows8BytesPerBlock =
    (P::kUnitBytes + P::kUnitBlocks - 1) / P::kUnitBlocks;

// 8 chunks of nibbles at `chunks`, each widened by widen(chunk, lo, hi) (nibbles16, iq4_wide16):
// its low nibbles are the pairs (2j, 2j + 1), its high ones (16 + 2j, 17 + 2j).
template <class Widen, class F>
inline void rows8_nibble_pairs(const uint8_t* chunks, Widen widen, F&& f) {
  for (int j = 0; j < 8; ++j) {
    __m256i lo, hi;
    widen(chunks + 16 * j, lo, hi);
    f(j, lo);
    f(8 + j, hi);
  }
}

template <class Ops>
struct Rows8Packed<Q4_0W<Ops>> : Rows8PerBlock<144> {  // 8 scales, 8 chunks
  static constexpr int kBias = 8;
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    rows8_nibble_pairs(blk + 16, nibbles16, f);
  }
};

template <class Ops>
struct Rows8Packed<Q4_1W<Ops>> : Rows8PerBlock<160> {  // 8 scales, 8 offsets, 8 chunks
  static constexpr int kBias = 0;
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    rows8_nibble_pairs(blk + 32, nibbles16, f);
  }
};

template <class Ops>
struct Rows8Packed<Q8_0W<Ops>> : Rows8PerBlock<272> {  // 8 scales, 16 chunks
  static constexpr int kBias = 0;
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    for (int j = 0; j < 16; ++j)
      f(j,
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 + 16 * j))));
  }
};

// iq4_nl's chunks are q4_0's; each nibble is looked up as its value + 128 (iq4_wide16).
template <class Ops>
struct Rows8Packed<Iq4_NLW<Ops>> : Rows8PerBlock<144> {  // 8 scales, 8 chunks
  static constexpr int kBias = 128;
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    rows8_nibble_pairs(blk + 16, iq4_wide16, f);
  }
};

// q5_0 and q5_1: q4's chunks after the 8 rows' fifth bits (weight_layout.hpp), each pair
// or'ed with its two bits at bit 4: the low nibbles' pairs (2j, 2j + 1) are bit j of each half,
// the high nibbles' (16 + 2j, 17 + 2j) bit 8 + j.
template <class F>
inline void q5_rows8_pairs(const uint8_t* p, F&& f) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i low = _mm256_set1_epi16(15), bit4 = _mm256_set1_epi16(16);
  for (int j = 0; j < 8; ++j, h = _mm256_srli_epi16(h, 1)) {
    const __m256i t =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32 + 16 * j)));
    f(j,
      _mm256_or_si256(_mm256_and_si256(t, low), _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4)));
    f(8 + j,
      _mm256_or_si256(_mm256_srli_epi16(t, 4), _mm256_and_si256(_mm256_srli_epi16(h, 4), bit4)));
  }
}

template <class Ops>
struct Rows8Packed<Q5_0W<Ops>> : Rows8PerBlock<176> {  // 8 scales, 8 fifth-bit masks, 8 chunks
  static constexpr int kBias = 16;
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    q5_rows8_pairs(blk + 16, f);
  }
};

template <class Ops>
struct Rows8Packed<Q5_1W<Ops>> : Rows8PerBlock<192> {  // 8 scales, 8 offsets, 8 masks, 8 chunks
  static constexpr int kBias = 0;
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    q5_rows8_pairs(blk + 32, f);
  }
};

// q4_k and q5_k: per unit the 8 rows' d and dmin, per block their 6-bit scales and mins as
// bytes, then q5_k's fifth bits and the chunks (q4_0's and q5_0's). Block b's scale is
// d·sc and its offset −(dmin·m), each exact in f32 (11 by 6 bits), as K4Scales computes them.
template <int64_t kSub>
struct Rows8K4 : Rows8Super<32, kSub> {
  using S = Rows8Super<32, kSub>;
  static constexpr int kBias = 0;
  static __m256 scale(const uint8_t* group, int64_t b) {
    return S::template factor_times<false>(group, b, 0, 0);
  }
  static __m256 offset(const uint8_t* group, int64_t b) {
    return _mm256_xor_ps(S::template factor_times<false>(group, b, 16, 8), _mm256_set1_ps(-0.f));
  }
};

template <class Ops>
struct Rows8Packed<Q4_KW<Ops>> : Rows8K4<144> {  // 8 scales, 8 mins, 8 chunks
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    rows8_nibble_pairs(blk + 16, nibbles16, f);
  }
};

template <class Ops>
struct Rows8Packed<Q5_KW<Ops>> : Rows8K4<176> {  // 8 scales, 8 mins, 8 fifth-bit masks, 8 chunks
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    q5_rows8_pairs(blk + 16, f);
  }
};

// iq4_xs: per unit the 8 rows' d, per block their ls − 32 as signed bytes, then iq4_nl's chunks.
// Block b's scale d·(ls − 32) is exact in f32, as Iq4_XSW computes it.
template <class Ops>
struct Rows8Packed<Iq4_XSW<Ops>> : Rows8Super<16, 136> {
  static constexpr int kBias = 128;
  static __m256 scale(const uint8_t* group, int64_t b) {
    return factor_times<true>(group, b, 0, 0);
  }
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    rows8_nibble_pairs(blk + 8, iq4_wide16, f);
  }
};

// q6_k: per unit the 8 rows' d, per block their two scales as signed bytes (elements 0-15's,
// then 16-31's), the high 2 bits of elements 0-15 and of 16-31 (weight_layout.cpp), then the low
// 4 bits as q4_0's chunks. Each pair is its nibbles or'ed with its 2 bits at bit 4: the low
// nibbles' pairs (2j, 2j + 1) are bits 2j of each half of the first masks, the high nibbles'
// (16 + 2j, 17 + 2j) of the second. The values are q + 32; the scales d·sc exact in f32, as
// Q6_KW computes them.
template <class Ops>
struct Rows8Packed<Q6_KW<Ops>> : Rows8Super<16, 208> {
  static constexpr int kBias = 32;
  static __m256 scale(const uint8_t* group, int64_t b) {
    return factor_times<true>(group, b, 0, 0);
  }
  static __m256 scale1(const uint8_t* group, int64_t b) {
    return factor_times<true>(group, b, 0, 8);
  }
  template <class F>
  static void pairs(const uint8_t* blk, F&& f) {
    __m256i lo_bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    __m256i hi_bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 48));
    const __m256i low = _mm256_set1_epi16(15), top = _mm256_set1_epi16(0x30);
    for (int j = 0; j < 8; ++j) {
      const __m256i t = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 80 + 16 * j)));
      f(j, _mm256_or_si256(_mm256_and_si256(t, low),
                           _mm256_and_si256(_mm256_slli_epi16(lo_bits, 4), top)));
      f(8 + j, _mm256_or_si256(_mm256_srli_epi16(t, 4),
                               _mm256_and_si256(_mm256_slli_epi16(hi_bits, 4), top)));
      lo_bits = _mm256_srli_epi16(lo_bits, 2), hi_bits = _mm256_srli_epi16(hi_bits, 2);
    }
  }
};

// Rows [m, m + RX) of x against rows [n, n + 8) packed at `group`: y[m..m+RX)[n..n+8). Each
// pair vector is widened once for the RX rows, read as stored: no panel is filled for a few rows
// of x (on AVX2 a filled panel's stores and reloads cost about half of 8 rows' products). One
// row keeps two chains of sums (a pmaddwd's latency); several rows are chains enough.
template <class D, class Mac, int RX = 1>
void rows8_packed(const RowdotQ8Args& a, const uint8_t* group, int64_t n, int64_t m) {
  using P = Rows8Packed<D>;
  // q6_k's two halves of a block keep a sum each: pairs 0-7 are elements 0-15.
  constexpr int kChains = RX == 1 || D::kHalves ? 2 : 1;
  const int64_t blocks = a.K / 32;
  __m256 acc[RX], off[RX];
  for (int i = 0; i < RX; ++i) acc[i] = off[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    // The group is one sequential run; 8 blocks ahead covers the line-fill latency at the
    // rate this loop consumes lines.
    for (int64_t o = 0; o < kRows8BytesPerBlock<P>; o += 64)
      _mm_prefetch(rows8_ahead<P>(group, b + 8) + o, _MM_HINT_T0);
    const Q16Block* xb[RX];
    for (int i = 0; i < RX; ++i) xb[i] = a.xq + (m + i) * blocks + b;
    __m256i s[RX][kChains];
    for (auto& row : s)
      for (__m256i& chain : row) chain = _mm256_setzero_si256();
    // x's pairs (2j, 2j + 1), each broadcast to the 8 rows' lanes.
    P::pairs(P::block(group, b), [&](int j, __m256i w) {
      const int c = D::kHalves ? j / 8 : j % kChains;
      for (int i = 0; i < RX; ++i) {
        int32_t q;
        std::memcpy(&q, xb[i]->q + 2 * j, sizeof q);
        s[i][c] = Mac::accumulate(s[i][c], w, _mm256_set1_epi32(q));
      }
    });
    const __m256 scale0 = P::scale(group, b);
    __m256 scale1 = scale0;
    if constexpr (D::kHalves) scale1 = P::scale1(group, b);
    for (int i = 0; i < RX; ++i) {
      const __m256 d = _mm256_set1_ps(xb[i]->d);
      if constexpr (D::kHalves) {
        for (int h = 0; h < 2; ++h) {
          const __m256i sums =
              _mm256_sub_epi32(s[i][h], _mm256_set1_epi32(P::kBias * xb[i]->sum_half[h]));
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(h ? scale1 : scale0, d),
                                   acc[i]);
        }
        continue;
      }
      __m256i sums = kChains == 2 ? _mm256_add_epi32(s[i][0], s[i][kChains - 1]) : s[i][0];
      if constexpr (P::kBias != 0)
        sums = _mm256_sub_epi32(
            sums, _mm256_set1_epi32(P::kBias * (xb[i]->sum_half[0] + xb[i]->sum_half[1])));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(scale0, d), acc[i]);
    }
    if constexpr (D::kOffset) {
      const __m256 coeff = P::offset(group, b);
      for (int i = 0; i < RX; ++i)
        off[i] = _mm256_fmadd_ps(coeff, _mm256_set1_ps(xb[i]->s), off[i]);
    }
  }
  for (int i = 0; i < RX; ++i) {
    alignas(32) float out[8];
    _mm256_store_ps(out, _mm256_add_ps(acc[i], off[i]));
    q8_store8(a, m + i, n, out);
  }
}

// The panel of rows [n, n + 8) from their packed group: the pair vectors as they are (less the
// bias, as q16_panel_fill leaves q4_0's), the scales and offsets converted once.
template <class D>
void q16_panel_fill_rows8(const uint8_t* group, int64_t blocks, Q16Panel& p) {
  using P = Rows8Packed<D>;
  const __m256i bias = _mm256_set1_epi16(P::kBias);
  for (int64_t b = 0; b < blocks; ++b) {
    P::pairs(P::block(group, b), [&](int j, __m256i w) {
      _mm256_store_si256(p.w(b, j), P::kBias ? _mm256_sub_epi16(w, bias) : w);
    });
    p.s0(b) = P::scale(group, b);
    if constexpr (D::kHalves) p.s1(b) = P::scale1(group, b);
    if constexpr (D::kOffset) p.coeff(b) = P::offset(group, b);
  }
}

// Up to this many rows of x, packed groups are read as they are stored (rows8_packed, or a Mac's
// 512-bit two_groups) rather than through panels filled for them.
inline constexpr int64_t kRows8DirectMaxM = 8;

// Weight rows [n0, n1) (whole groups of 8: the split's unit is 16) packed against every row of
// x: up to kRows8DirectMaxM rows as stored, several rows of x per pass; more through panels.
template <class D, class Mac>
void q16_rows8_columns(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  using P = Rows8Packed<D>;
  const int64_t blocks = a.K / 32, group_bytes = blocks / P::kUnitBlocks * P::kUnitBytes;
  const uint8_t* w = static_cast<const uint8_t*>(a.w);
  if (a.M > kRows8DirectMaxM) {
    q16_panels_over<D, Mac>(a, w, group_bytes, n0, n1, [&](const uint8_t* src, Q16Panel& p) {
      q16_panel_fill_rows8<D>(src, blocks, p);
    });
    return;
  }
  int64_t n = n0;
  if constexpr (requires { Mac::kTwoPanelsWide; } && !D::kHalves) {
    for (; a.M >= 4 && n + 16 <= n1; n += 16) {
      const uint8_t *ga = w + (n / 8) * group_bytes, *gb = ga + group_bytes;
      int64_t m = 0;
      for (; m + 8 <= a.M; m += 8) Mac::template two_groups<D, 8>(a, ga, gb, n, m);
      for (; m + 4 <= a.M; m += 4) Mac::template two_groups<D, 4>(a, ga, gb, n, m);
      for (; m < a.M; ++m) Mac::template two_groups<D, 1>(a, ga, gb, n, m);
    }
  }
  for (; n < n1; n += 8) {
    const uint8_t* group = w + (n / 8) * group_bytes;
    int64_t m = 0;
    for (; m + 8 <= a.M; m += 8) rows8_packed<D, Mac, 8>(a, group, n, m);
    for (; m + 4 <= a.M; m += 4) rows8_packed<D, Mac, 4>(a, group, n, m);
    for (; m + 2 <= a.M; m += 2) rows8_packed<D, Mac, 2>(a, group, n, m);
    for (; m < a.M; ++m) rows8_packed<D, Mac>(a, group, n, m);
  }
}

// A tier's columns on the 16-bit forms with its multiply-accumulate: fewer than 4 rows of x
// through the 8-row form, more through panels; packed weights through their own forms.
template <class Ops, class Mac>
void q16_columns(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  switch (a.layout) {
    case kLayoutQ4_0Rows8: return q16_rows8_columns<Q4_0W<Ops>, Mac>(a, n0, n1);
    case kLayoutQ4_1Rows8: return q16_rows8_columns<Q4_1W<Ops>, Mac>(a, n0, n1);
    case kLayoutQ8_0Rows8: return q16_rows8_columns<Q8_0W<Ops>, Mac>(a, n0, n1);
    case kLayoutIq4_NLRows8: return q16_rows8_columns<Iq4_NLW<Ops>, Mac>(a, n0, n1);
    case kLayoutQ5_0Rows8: return q16_rows8_columns<Q5_0W<Ops>, Mac>(a, n0, n1);
    case kLayoutQ5_1Rows8: return q16_rows8_columns<Q5_1W<Ops>, Mac>(a, n0, n1);
    case kLayoutQ4_KRows8: return q16_rows8_columns<Q4_KW<Ops>, Mac>(a, n0, n1);
    case kLayoutQ5_KRows8: return q16_rows8_columns<Q5_KW<Ops>, Mac>(a, n0, n1);
    case kLayoutIq4_XSRows8: return q16_rows8_columns<Iq4_XSW<Ops>, Mac>(a, n0, n1);
    case kLayoutQ6_KRows8: return q16_rows8_columns<Q6_KW<Ops>, Mac>(a, n0, n1);
    default: break;
  }
  with_q8_decoder<Ops>(a.wtype, [&](auto d) {
    using D = decltype(d);
    if (a.M < 4)
      q8_columns_by8<Ops, D>(a, n0, n1, q8_rows8_avx2<D, Mac>);
    else
      q16_panel_columns<Ops, D, Mac>(a, n0, n1);
  });
}

}  // namespace
}  // namespace sy::cpu
