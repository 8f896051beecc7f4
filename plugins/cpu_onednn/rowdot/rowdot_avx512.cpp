// The avx512 tier of rowdot.hpp: 16 lanes, FMA, and vdpbf16ps for bf16 weights with bf16 x where
// the CPU has AVX512-BF16. Each weight dtype has a decoder that yields 32 consecutive elements of
// a row as two vectors of f32 (`chunk`), by GGUF's formulas (the q4 types through a
// per-block table of their 16 values indexed with vpermps, each value d·i + m in one FMA). A tile
// of RN weight rows × RM x rows multiplies those vectors in; every element's arithmetic is the one
// rowdot.hpp states, whatever RN, RM and the path (in registers for decode-sized M, through an L1
// panel of dequantized rows for larger M). Only this file is compiled with AVX-512 flags.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "rowdot/rowdot.hpp"
#include "rowdot/rowdot_lanes.hpp"
#include "tier/register_tile.hpp"
#include "tier/scalar_math.hpp"
#include "tier/simd_lanes.hpp"
#include "tier/tier_scratch.hpp"

namespace sy::cpu {
namespace {

constexpr int kTileRows = 4;        // weight rows per register tile
constexpr int kDirectRows = 2;      // up to this many x rows: 4 weight rows per tile
constexpr int kDirectMaxRows = 16;  // up to this many x rows: decode in registers, no panel
constexpr int64_t kPanelRows = 8;   // weight rows dequantized into a panel at once
constexpr int64_t kXBlock = 64;     // x rows a panel serves before the next panel (L2-sized)

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __mmask16 first(int64_t n) {
  return n <= 0 ? __mmask16(0) : n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}

inline __m512 lane(__m512 v, int i) {
  return _mm512_permutexvar_ps(_mm512_set1_epi32(i), v);
}

inline __m512 widen_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The tables are functions, not namespace-scope constants: a constant of a vector type has a
// dynamic initializer, which would run AVX-512 code when the plugin is loaded, before any tier
// is chosen (SIGILL on a CPU without AVX-512; docs/cpu-tiers.md).
inline __m512 iota_ps() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
// kvalues_iq4nl (sy_iq4nl_value) as f32 lanes.
inline __m512 iq4_values_ps() {
  return _mm512_setr_ps(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
}

// E2M1's 16 values (sy_e2m1_value) as f32 lanes.
inline __m512 e2m1_values_ps() {
  return _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                        -2.0f, -3.0f, -4.0f, -6.0f);
}

// 32 elements whose 4-bit indices are the low (elements 0–15) and high (16–31) nibbles of the
// 16 bytes at qs, looked up in a table of 16 values with vpermps (which reads an index's low 4
// bits only, so the low nibbles need no mask).
inline void nibble_lookup(const uint8_t* qs, __m512 table, __m512& lo, __m512& hi) {
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  lo = _mm512_permutexvar_ps(q, table);
  hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
}

// ---- decoders: 32 consecutive elements of a row as f32 ---------------------------------------
//
// kBlock elements in kBytes bytes per block; State is what a block's chunks share (its scales,
// its table); chunk(c) yields elements [32c, 32c + 32) of the block. f32 and bf16 rows are blocks
// of 32 with a masked tail (tail(valid)).

struct F32Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 128;
  static constexpr bool kTail = true;
  struct State {};
  static State state(const uint8_t*) { return {}; }
  static void chunk(const uint8_t* b, const State&, int, __m512& lo, __m512& hi) {
    lo = _mm512_loadu_ps(b);
    hi = _mm512_loadu_ps(b + 64);
  }
  static void tail(const uint8_t* b, int64_t valid, __m512& lo, __m512& hi) {
    lo = _mm512_maskz_loadu_ps(first(valid), b);
    hi = _mm512_maskz_loadu_ps(first(valid - 16), b + 64);
  }
};

struct Bf16Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 64;
  static constexpr bool kTail = true;
  struct State {};
  static State state(const uint8_t*) { return {}; }
  static void chunk(const uint8_t* b, const State&, int, __m512& lo, __m512& hi) {
    lo = widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
    hi = widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32)));
  }
  static void tail(const uint8_t* b, int64_t valid, __m512& lo, __m512& hi) {
    lo = widen_bf16(_mm256_maskz_loadu_epi16(first(valid), b));
    hi = widen_bf16(_mm256_maskz_loadu_epi16(first(valid - 16), b + 32));
  }
};

struct Q8_0Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 34;
  static constexpr bool kTail = false;
  struct State {
    __m512 d;
  };
  static State state(const uint8_t* b) { return {_mm512_set1_ps(half_at(b))}; }
  static void chunk(const uint8_t* b, const State& s, int, __m512& lo, __m512& hi) {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18));
    lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), s.d);
    hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), s.d);
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// q4_0 (d·(q − 8)) and q4_1 (d·q + m): the block's 16 values in a table, indexed by nibble with
// vpermps (which reads an index's low 4 bits only): elements 0–15 are the low nibbles of the 16
// bytes, 16–31 their high nibbles.
template <sy_dtype T>
struct Q4Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = T == SY_DTYPE_Q4_0 ? 18 : 20;
  static constexpr bool kTail = false;
  struct State {
    __m512 table;
  };
  static State state(const uint8_t* b) {
    __m512 d, m;
    if constexpr (T == SY_DTYPE_Q4_1) {
      int32_t bits;
      std::memcpy(&bits, b, 4);
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
      d = _mm512_broadcastss_ps(dm);
      m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));
    } else {
      d = _mm512_set1_ps(half_at(b));
      m = _mm512_mul_ps(d, _mm512_set1_ps(-8.f));
    }
    return {_mm512_fmadd_ps(iota_ps(), d, m)};
  }
  static void chunk(const uint8_t* b, const State& s, int, __m512& lo, __m512& hi) {
    nibble_lookup(b + (T == SY_DTYPE_Q4_0 ? 2 : 4), s.table, lo, hi);
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// q5_0 (d·(q − 16)) and q5_1 (d·q + m), q = nibble + 16·(the element's bit of qh): the block's
// 32 values in two tables, indexed with vpermt2ps (which reads an index's low 5 bits); element i
// of a half takes bit 4 of its index from bit i (elements 0–15) or 16 + i (16–31) of qh.
template <sy_dtype T>
struct Q5Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = T == SY_DTYPE_Q5_0 ? 22 : 24;
  static constexpr int kQh = T == SY_DTYPE_Q5_0 ? 2 : 4;  // qh's offset; qs follow it
  static constexpr bool kTail = false;
  struct State {
    __m512 low, high;  // the values of q 0–15 and 16–31
    uint32_t qh;
  };
  static State state(const uint8_t* b) {
    __m512 d, m;
    if constexpr (T == SY_DTYPE_Q5_1) {
      d = _mm512_set1_ps(half_at(b));
      m = _mm512_set1_ps(half_at(b + 2));
    } else {  // −16d is exact, so each FMA rounds d·(q − 16) once, as the scalar product
      d = _mm512_set1_ps(half_at(b));
      m = _mm512_mul_ps(d, _mm512_set1_ps(-16.f));
    }
    uint32_t qh;
    std::memcpy(&qh, b + kQh, 4);
    return {_mm512_fmadd_ps(iota_ps(), d, m),
            _mm512_fmadd_ps(_mm512_add_ps(iota_ps(), _mm512_set1_ps(16.f)), d, m), qh};
  }
  static void chunk(const uint8_t* b, const State& s, int, __m512& lo, __m512& hi) {
    const __m512i q =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQh + 4)));
    const __m512i sixteen = _mm512_set1_epi32(16);
    const __m512i ql = _mm512_and_si512(q, _mm512_set1_epi32(15)), qhi = _mm512_srli_epi32(q, 4);
    lo = _mm512_permutex2var_ps(s.low, _mm512_mask_or_epi32(ql, __mmask16(s.qh), ql, sixteen),
                                s.high);
    hi = _mm512_permutex2var_ps(
        s.low, _mm512_mask_or_epi32(qhi, __mmask16(s.qh >> 16), qhi, sixteen), s.high);
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// iq4_nl: d·kvalues_iq4nl[nibble], nibbles as q4_0's; the table is the 16 values times d (one
// rounding each, as the scalar product).
struct Iq4NlRows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 18;
  static constexpr bool kTail = false;
  struct State {
    __m512 table;
  };
  static State state(const uint8_t* b) {
    return {_mm512_mul_ps(iq4_values_ps(), _mm512_set1_ps(half_at(b)))};
  }
  static void chunk(const uint8_t* b, const State& s, int, __m512& lo, __m512& hi) {
    nibble_lookup(b + 2, s.table, lo, hi);
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// mxfp4: as iq4_nl, the E2M1 values under the block's E8M0 scale (every product exact).
struct Mxfp4Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 17;
  static constexpr bool kTail = false;
  struct State {
    __m512 table;
  };
  static State state(const uint8_t* b) {
    return {_mm512_mul_ps(e2m1_values_ps(), _mm512_set1_ps(e8m0_scale(b[0])))};
  }
  static void chunk(const uint8_t* b, const State& s, int, __m512& lo, __m512& hi) {
    nibble_lookup(b + 1, s.table, lo, hi);
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// iq4_xs: sub-block c (32 elements) as iq4_nl under its scale d·(ls − 32): the table is the 16
// values times that scale, each rounded once (the scale itself rounded once before, as GGUF's).
struct Iq4XsRows {
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = 136;
  static constexpr bool kTail = false;
  struct State {
    float scale[8];
  };
  static State state(const uint8_t* b) {
    State s;
    for (int j = 0; j < 8; ++j) s.scale[j] = iq4_xs_scale(b, j);
    return s;
  }
  static void chunk(const uint8_t* b, const State& s, int c, __m512& lo, __m512& hi) {
    nibble_lookup(b + 8 + 16 * c, _mm512_mul_ps(iq4_values_ps(), _mm512_set1_ps(s.scale[c])), lo,
                  hi);
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// The eight 6-bit scales and mins of a q4_k / q5_k block (scales_mins_k4) as f32 lanes 0-7 = d·sc
// and 8-15 = −dmin·m.
inline __m512 k4_scales(const uint8_t* blk) {
  uint8_t sm[16];
  scales_mins_k4(blk + 4, sm);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sm));
  const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
  const __m512 dm =
      _mm512_insertf32x8(_mm512_set1_ps(half_at(blk)), _mm256_set1_ps(-half_at(blk + 2)), 1);
  return _mm512_mul_ps(f, dm);
}

// q4_k / q5_k: 256 elements in 8 sub-blocks of 32, each d·sc·q − dmin·m (a table of its 16, or
// for q5_k 32, values); sub-block c takes the low (c even) or high nibbles of bytes 32·(c/2) …
// +31, and q5_k its fifth bit from bit c of qh[l].
template <sy_dtype T>
struct K4Rows {
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = T == SY_DTYPE_Q4_K ? 144 : 176;
  static constexpr bool kTail = false;
  struct State {
    __m512 scales;
  };
  static State state(const uint8_t* b) { return {k4_scales(b)}; }
  static void chunk(const uint8_t* b, const State& st, int c, __m512& lo, __m512& hi) {
    const __m512 s = lane(st.scales, c), mn = lane(st.scales, 8 + c);
    const __m512 t = _mm512_fmadd_ps(iota_ps(), s, mn);
    const uint8_t* qs = b + (T == SY_DTYPE_Q4_K ? 16 : 48) + 32 * (c / 2);
    __m512i z[2] = {
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))),
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)))};
    if (c & 1)
      for (auto& v : z) v = _mm512_srli_epi32(v, 4);
    if constexpr (T == SY_DTYPE_Q4_K) {
      lo = _mm512_permutexvar_ps(z[0], t);
      hi = _mm512_permutexvar_ps(z[1], t);
    } else {
      const __m512 t16 = _mm512_fmadd_ps(_mm512_add_ps(iota_ps(), _mm512_set1_ps(16.f)), s, mn);
      const __m512i low4 = _mm512_set1_epi32(15), one = _mm512_set1_epi32(1);
      __m512 out[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i qh = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 + 16 * h)));
        const __m512i bit = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, c), one), 4);
        const __m512i idx = _mm512_or_si512(_mm512_and_si512(z[h], low4), bit);
        out[h] = _mm512_permutex2var_ps(t, idx, t16);
      }
      lo = out[0];
      hi = out[1];
    }
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// q2_k and q3_k: chunk c is shift pair c % 4 of half c / 4 — 32 bytes of 2-bit values, sub-blocks
// 2c (elements 0-15) and 2c + 1 (16-31) — each value looked up in its sub-block's table: q2_k's
// d·sc·q − dmin·m for q = 0…3 (each factor rounded as the scalar's), q3_k's d·(sc − 32)·(q − 4)
// for q = 0…7, index q + 4 when the element's bit 4·(c / 4) + c % 4 of hmask is set.
template <sy_dtype T>
struct K23Rows {
  static constexpr bool kQ2 = T == SY_DTYPE_Q2_K;
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = kQ2 ? 84 : 110;
  static constexpr bool kTail = false;
  using State = K23Factors;  // q2_k: d·(sc & 15), dmin·(sc >> 4); q3_k: d·(sc − 32), 0
  static State state(const uint8_t* b) { return k23_factors(T, b); }
  static __m512 table(const State& st, int sub) {
    const __m512 q = kQ2 ? iota_ps() : _mm512_sub_ps(iota_ps(), _mm512_set1_ps(4.f));
    return _mm512_sub_ps(_mm512_mul_ps(q, _mm512_set1_ps(st.scale[sub])),
                         _mm512_set1_ps(st.min[sub]));
  }
  static void chunk(const uint8_t* b, const State& st, int c, __m512& lo, __m512& hi) {
    const __m128i shift = _mm_cvtsi32_si128(2 * (c % 4));
    const uint8_t* q = b + (kQ2 ? 16 : 32) + 32 * (c / 4);
    const __m512i three = _mm512_set1_epi32(3);
    __m512 out[2];
    for (int h = 0; h < 2; ++h) {
      __m512i idx = _mm512_and_si512(
          _mm512_srl_epi32(
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h))),
              shift),
          three);
      if constexpr (!kQ2) {
        const __m128i bit = _mm_cvtsi32_si128(4 * (c / 4) + c % 4);
        const __m512i high = _mm512_and_si512(
            _mm512_srl_epi32(
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * h))),
                bit),
            _mm512_set1_epi32(1));
        idx = _mm512_or_si512(idx, _mm512_slli_epi32(high, 2));
      }
      out[h] = _mm512_permutexvar_ps(idx, table(st, 2 * c + h));
    }
    lo = out[0];
    hi = out[1];
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// q6_k: 256 elements, halves of 128, each four groups k of 32: element 128·hf + 32·k + l has the
// low (k < 2) or high nibble of ql[64·hf + l + (k odd ? 32 : 0)] and bits 2k of qh[32·hf + l],
// q − 32, times d·sc[8·hf + 2k + l / 16] (that product rounded once, then the element's).
struct Q6KRows {
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = 210;
  static constexpr bool kTail = false;
  struct State {
    __m512 scales;
  };
  static State state(const uint8_t* b) {
    return {_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)))),
                          _mm512_set1_ps(half_at(b + 208)))};
  }
  static void chunk(const uint8_t* b, const State& st, int c, __m512& lo, __m512& hi) {
    const int hf = c / 4, k = c % 4;
    const uint8_t* ql = b + 64 * hf + (k & 1 ? 32 : 0);
    const uint8_t* qh = b + 128 + 32 * hf;
    const __m512i low4 = _mm512_set1_epi32(15), three = _mm512_set1_epi32(3),
                  k32 = _mm512_set1_epi32(32);
    __m512 out[2];
    for (int g = 0; g < 2; ++g) {
      __m512i l =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ql + 16 * g)));
      if (k >= 2) l = _mm512_srli_epi32(l, 4);
      const __m512i h =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16 * g)));
      const __m512i q = _mm512_or_si512(
          _mm512_and_si512(l, low4),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2 * k), three), 4));
      out[g] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, k32)),
                             lane(st.scales, 8 * hf + 2 * k + g));
    }
    lo = out[0];
    hi = out[1];
  }
  static void tail(const uint8_t*, int64_t, __m512&, __m512&) {}
};

// ---- tiles ------------------------------------------------------------------------------------

inline void store(const RowdotArgs& a, int64_t m, int64_t n, float v) {
  if (a.y_bf16)
    static_cast<bf16_bits*>(a.y)[m * a.N + n] = from_f32<bf16_bits>(v);
  else
    static_cast<float*>(a.y)[m * a.N + n] = v;
}

// RN weight rows (at `w`, `row_bytes` apart; y's columns n, n + 1, …) × RM rows of x from m0:
// every element over the whole of K in decoder D's 32-element chunks.
template <class D, int RN, int RM>
void tile(const RowdotArgs& a, const uint8_t* w, int64_t row_bytes, int64_t n, int64_t m0,
          Sweep* sweep) {
  const int64_t K = a.K, blocks = K / D::kBlock;
  const float* x = a.xf + m0 * K;
  __m512 acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  // The RN rows' 32 elements at k against each x row in turn: x is loaded once per tile, so RM
  // may be as wide as the accumulators allow.
  auto madd = [&](const __m512(&lo)[RN], const __m512(&hi)[RN], int64_t k, __mmask16 ml,
                  __mmask16 mh) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) {
      const __m512 xl = _mm512_maskz_loadu_ps(ml, x + m * K + k);
      const __m512 xh = _mm512_maskz_loadu_ps(mh, x + m * K + k + 16);
      SY_TILE_LOOP
      for (int r = 0; r < RN; ++r)
        acc[r][m] = _mm512_fmadd_ps(hi[r], xh, _mm512_fmadd_ps(lo[r], xl, acc[r][m]));
    }
  };
  for (int64_t b = 0; b < blocks; ++b) {
    if (sweep) sweep->reach(w + (RN - 1) * row_bytes + b * D::kBytes);
    typename D::State st[RN];
    SY_TILE_LOOP
    for (int r = 0; r < RN; ++r) st[r] = D::state(w + r * row_bytes + b * D::kBytes);
    SY_TILE_LOOP
    for (int c = 0; c < D::kBlock / 32; ++c) {
      __m512 lo[RN], hi[RN];
      SY_TILE_LOOP
      for (int r = 0; r < RN; ++r)
        D::chunk(w + r * row_bytes + b * D::kBytes, st[r], c, lo[r], hi[r]);
      madd(lo, hi, b * D::kBlock + 32 * c, 0xffff, 0xffff);
    }
  }
  if constexpr (D::kTail) {
    const int64_t k = blocks * D::kBlock, valid = K - k;
    if (valid > 0) {
      __m512 lo[RN], hi[RN];
      SY_TILE_LOOP
      for (int r = 0; r < RN; ++r)
        D::tail(w + r * row_bytes + blocks * D::kBytes, valid, lo[r], hi[r]);
      madd(lo, hi, k, first(valid), first(valid - 16));
    }
  }
  // Every accumulator's lanes summed by Avx512Lanes::sum_each's one tree, 16 at a time (a
  // tile's accumulators, padded with zeros: one tree for every element whatever the tile).
  static_assert(RN * RM <= 16);
  __m512 all[16];
  SY_TILE_LOOP
  for (int i = 0; i < 16; ++i) all[i] = i < RN * RM ? acc[i / RM][i % RM] : _mm512_setzero_ps();
  alignas(64) float sums[16];
  _mm512_store_ps(sums, Avx512Lanes::sum_each(all));
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) store(a, m0 + m, n + r, sums[r * RM + m]);
  }
}

// RN weight rows at `at` × x rows [m, M) in one tile (RM = M − m <= kRestMax): enough
// accumulators to hide the FMA latency, the weights decoded once.
template <class D, int RN, int RM>
void tile_rest(const RowdotArgs& a, const uint8_t* at, int64_t row_bytes, int64_t n, int64_t m,
               Sweep* sweep) {
  if constexpr (RM >= 1) {
    if (a.M - m == RM) return tile<D, RN, RM>(a, at, row_bytes, n, m, sweep);
    return tile_rest<D, RN, RM - 1>(a, at, row_bytes, n, m, sweep);
  }
}

// Weight rows [n0, n1) × every x row, decoded in registers and used at once (decode-sized M:
// the weights are read once, in their own bytes). One token: 4 weight rows per tile; a step of
// several sequences: pairs of weight rows against the x rows in groups of 8 (the rest in one
// tile), so up to 8 sequences decode each weight block once.
template <class D>
void direct(const RowdotArgs& a, const uint8_t* w, int64_t row_bytes, int64_t n0, int64_t n1) {
  Sweep sweep(w + n0 * row_bytes);
  auto over_m = [&](auto rn, int64_t n) {
    constexpr int RN = decltype(rn)::value;
    const uint8_t* at = w + n * row_bytes;
    if (a.M <= kDirectRows) return tile_rest<D, RN, kDirectRows>(a, at, row_bytes, n, 0, &sweep);
    if constexpr (RN <= 2) {  // 4-row tiles serve one token only
      int64_t m = 0;
      for (; m + 8 <= a.M; m += 8) tile<D, RN, 8>(a, at, row_bytes, n, m, &sweep);
      if (m < a.M) tile_rest<D, RN, 7>(a, at, row_bytes, n, m, &sweep);
    }
  };
  int64_t n = n0;
  if (a.M <= kDirectRows)
    for (; n + kTileRows <= n1; n += kTileRows) over_m(std::integral_constant<int, kTileRows>{}, n);
  for (; n + 2 <= n1; n += 2) over_m(std::integral_constant<int, 2>{}, n);
  for (; n < n1; ++n) over_m(std::integral_constant<int, 1>{}, n);
}

// Panel rows [0, rows) (f32, `row_bytes` apart; y's columns from n) × x rows [m0, m1): tiles of
// kTileRows × RM, the remainders narrower.
template <int RM>
void tiles(const RowdotArgs& a, const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t n,
           int64_t m0, int64_t m1) {
  auto over_m = [&](auto rn, const uint8_t* at, int64_t col) {
    constexpr int RN = decltype(rn)::value;
    int64_t m = m0;
    for (; m + RM <= m1; m += RM) tile<F32Rows, RN, RM>(a, at, row_bytes, col, m, nullptr);
    for (; m < m1; ++m) tile<F32Rows, RN, 1>(a, at, row_bytes, col, m, nullptr);
  };
  int64_t r = 0;
  for (; r + kTileRows <= rows; r += kTileRows)
    over_m(std::integral_constant<int, kTileRows>{}, w + r * row_bytes, n + r);
  for (; r < rows; ++r) over_m(std::integral_constant<int, 1>{}, w + r * row_bytes, n + r);
}

// `rows` weight rows decoded to f32 in `panel` (K floats each; past K, whatever the tail's
// masked loads leave: never read as more than zeros).
template <class D>
void fill_panel(const uint8_t* w, int64_t row_bytes, int64_t K, int64_t rows, float* panel,
                Sweep& sweep) {
  const int64_t blocks = K / D::kBlock;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    float* out = panel + r * K;
    for (int64_t b = 0; b < blocks; ++b) {
      sweep.reach(row + b * D::kBytes);
      const typename D::State st = D::state(row + b * D::kBytes);
      SY_TILE_LOOP
      for (int c = 0; c < D::kBlock / 32; ++c) {
        __m512 lo, hi;
        D::chunk(row + b * D::kBytes, st, c, lo, hi);
        _mm512_storeu_ps(out + b * D::kBlock + 32 * c, lo);
        _mm512_storeu_ps(out + b * D::kBlock + 32 * c + 16, hi);
      }
    }
    if constexpr (D::kTail) {
      const int64_t k = blocks * D::kBlock, valid = K - k;
      if (valid > 0) {
        __m512 lo, hi;
        D::tail(row + blocks * D::kBytes, valid, lo, hi);
        _mm512_mask_storeu_ps(out + k, first(valid), lo);
        _mm512_mask_storeu_ps(out + k + 16, first(valid - 16), hi);
      }
    }
  }
}

// y's columns [n0, n1) with weight rows decoded by D.
template <class D>
void columns_t(const RowdotArgs& a, int64_t n0, int64_t n1) {
  const int64_t row_bytes = row_bytes_of<D>(a.K);
  const auto* w = static_cast<const uint8_t*>(a.w);
  if (a.M <= kDirectMaxRows) return direct<D>(a, w, row_bytes, n0, n1);
  // Larger M: f32 rows are read in place; the others are decoded into a panel in L1 once per
  // block of x rows and tiled over like f32 rows (the same values as in registers).
  constexpr bool in_place = std::is_same_v<D, F32Rows>;
  float* panel = in_place ? nullptr
                          : static_cast<float*>(tier_scratch(
                                ScratchSlot::panel, sizeof(float) * size_t(kPanelRows * a.K)));
  const int64_t f32_row = a.K * 4;
  for (int64_t m0 = 0; m0 < a.M; m0 += kXBlock) {
    const int64_t m1 = std::min(a.M, m0 + kXBlock);
    Sweep sweep(w + n0 * row_bytes);  // each block of x rows reads the weights once, in order
    for (int64_t nb = n0; nb < n1; nb += kPanelRows) {
      const int64_t rows = std::min(kPanelRows, n1 - nb);
      const uint8_t* at = w + nb * row_bytes;
      if (in_place) sweep.reach(at + rows * row_bytes - 1);
      if (!in_place) {
        fill_panel<D>(at, row_bytes, a.K, rows, panel, sweep);
        at = reinterpret_cast<const uint8_t*>(panel);
      }
      tiles<4>(a, at, f32_row, rows, nb, m0, m1);
    }
  }
}

// ---- bf16 × bf16 with vdpbf16ps ---------------------------------------------------------------

template <int RN, int RM>
void dot_tile(const RowdotArgs& a, const uint16_t* w, int64_t n, int64_t m0, Sweep* sweep) {
  const int64_t K = a.K, chunks = K / 32, valid = K % 32;
  __m512 acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t j, __mmask32 mask) {
    if (sweep) sweep->reach(reinterpret_cast<const uint8_t*>(w + (RN - 1) * K + 32 * j));
    __m512bh xv[RM];
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m)
      xv[m] = (__m512bh)_mm512_maskz_loadu_epi16(mask, a.xb + (m0 + m) * K + 32 * j);
    SY_TILE_LOOP
    for (int r = 0; r < RN; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + r * K + 32 * j);
      SY_TILE_LOOP
      for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wv, xv[m]);
    }
  };
  for (int64_t j = 0; j < chunks; ++j) step(j, ~__mmask32(0));
  if (valid > 0) step(chunks, __mmask32((uint64_t(1) << valid) - 1));
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) store(a, m0 + m, n + r, _mm512_reduce_add_ps(acc[r][m]));
  }
}

// Every x row against a block of weight rows before the next block (L2 reuse), the x rows in
// blocks of kXBlock; decode-sized M prefetches the weights ahead.
template <int RN>
void dot_rows(const RowdotArgs& a, int64_t n, int64_t m0, int64_t m1, Sweep* sweep) {
  const uint16_t* w = static_cast<const uint16_t*>(a.w) + n * a.K;
  int64_t m = m0;
  for (; m + 4 <= m1; m += 4) dot_tile<RN, 4>(a, w, n, m, sweep);
  for (; m < m1; ++m) dot_tile<RN, 1>(a, w, n, m, sweep);
}

void dot_columns(const RowdotArgs& a, int64_t n0, int64_t n1) {
  Sweep sweep(static_cast<const uint8_t*>(a.w) + n0 * a.K * 2);
  Sweep* ahead = a.M <= kDirectMaxRows ? &sweep : nullptr;
  for (int64_t m0 = 0; m0 < a.M; m0 += kXBlock) {
    const int64_t m1 = std::min(a.M, m0 + kXBlock);
    int64_t n = n0;
    for (; n + kTileRows <= n1; n += kTileRows) dot_rows<kTileRows>(a, n, m0, m1, ahead);
    for (; n < n1; ++n) dot_rows<1>(a, n, m0, m1, ahead);
  }
}

// ---- the tier ---------------------------------------------------------------------------------

template <bool kDot>
void columns(const RowdotArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case SY_DTYPE_F32: return columns_t<F32Rows>(a, n0, n1);
    case SY_DTYPE_BF16:
      // f32 x (moe_experts' down reads its f32 activation) takes the widening path.
      if constexpr (kDot)
        if (a.xb) return dot_columns(a, n0, n1);
      return columns_t<Bf16Rows>(a, n0, n1);
    case SY_DTYPE_Q8_0: return columns_t<Q8_0Rows>(a, n0, n1);
    case SY_DTYPE_Q4_0: return columns_t<Q4Rows<SY_DTYPE_Q4_0>>(a, n0, n1);
    case SY_DTYPE_Q4_1: return columns_t<Q4Rows<SY_DTYPE_Q4_1>>(a, n0, n1);
    case SY_DTYPE_Q4_K: return columns_t<K4Rows<SY_DTYPE_Q4_K>>(a, n0, n1);
    case SY_DTYPE_Q5_K: return columns_t<K4Rows<SY_DTYPE_Q5_K>>(a, n0, n1);
    case SY_DTYPE_Q6_K: return columns_t<Q6KRows>(a, n0, n1);
    case SY_DTYPE_Q5_0: return columns_t<Q5Rows<SY_DTYPE_Q5_0>>(a, n0, n1);
    case SY_DTYPE_Q5_1: return columns_t<Q5Rows<SY_DTYPE_Q5_1>>(a, n0, n1);
    case SY_DTYPE_IQ4_NL: return columns_t<Iq4NlRows>(a, n0, n1);
    case SY_DTYPE_MXFP4: return columns_t<Mxfp4Rows>(a, n0, n1);
    case SY_DTYPE_Q2_K: return columns_t<K23Rows<SY_DTYPE_Q2_K>>(a, n0, n1);
    case SY_DTYPE_Q3_K: return columns_t<K23Rows<SY_DTYPE_Q3_K>>(a, n0, n1);
    case SY_DTYPE_IQ4_XS: return columns_t<Iq4XsRows>(a, n0, n1);
    // A block type without a decoder of its own (none today): rowdot_lanes.hpp's loops on 16
    // lanes, over each block dequantized by the scalar formulas. Exact, and batch-invariant the
    // same way (one chain of FMAs per element over K), but slower than a register decoder.
    default:
      if (sy_dtype_is_blocked(a.wtype)) return lane_columns<Avx512Lanes>(a, quant_avx512(), n0, n1);
      return;
  }
}

bool reads_bf16_plain(sy_dtype, bool) {
  return false;
}
bool reads_bf16_dot(sy_dtype wtype, bool x_bf16) {
  return wtype == SY_DTYPE_BF16 && x_bf16;
}

const RowdotTier kPlain = {"avx512", columns<false>, reads_bf16_plain, kPanelRows};
const RowdotTier kDot = {"avx512_bf16", columns<true>, reads_bf16_dot, kPanelRows};

}  // namespace

const RowdotTier& rowdot_avx512(bool bf16_dot) {
  return bf16_dot ? kDot : kPlain;
}

}  // namespace sy::cpu
