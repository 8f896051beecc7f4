// The avx2 tier of rowdot.hpp: 8 lanes with FMA. As in the avx512 tier, each weight dtype has a
// decoder that yields 32 consecutive elements of a row as four vectors of f32 (`chunk`), by
// GGUF's formulas (each quantized value d·q + m in one FMA); decode-sized M multiplies them in
// from registers, tiles of RN weight rows × RM x rows, and larger M decodes a panel of rows into
// L1 with the same decoders and tiles over it with rowdot_lanes.hpp. Every element is one chain
// of FMAs over K's 8-element chunks, then Avx2Lanes::sum: the same arithmetic on both paths.
// Only this file is compiled with AVX2 flags; rowdot_tier() calls it only on a CPU that has them.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "quant/quant_blocks.hpp"
#include "rowdot/rowdot_lanes.hpp"
#include "tier/register_tile.hpp"
#include "tier/simd_lanes.hpp"
#include "tier/tier_scratch.hpp"

namespace sy::cpu {
namespace {

constexpr int kTileRows = 4;    // weight rows per register tile
constexpr int kDirectRows = 2;  // up to this many x rows: decode in registers

using V8 = __m256;

inline V8 ints(__m128i eight_bytes, bool is_signed) {
  return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(eight_bytes)
                                      : _mm256_cvtepu8_epi32(eight_bytes));
}
inline __m128i bytes8(const uint8_t* p) {
  return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
}
// Lanes below `valid` set (all for valid >= 8, none for valid <= 0).
inline __m256i first(int64_t valid) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(valid, 0, 8))), iota);
}
inline V8 widen_bf16(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// ---- decoders: 32 consecutive elements of a row as f32 (see rowdot_avx512.cpp) ----------------

struct F32Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 128;
  static constexpr bool kTail = true;
  struct State {};
  static State state(const uint8_t*) { return {}; }
  static void chunk(const uint8_t* b, const State&, int, V8 (&v)[4]) {
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(b) + 8 * i);
  }
  static void tail(const uint8_t* b, int64_t valid, V8 (&v)[4]) {
    for (int i = 0; i < 4; ++i)
      v[i] = _mm256_maskload_ps(reinterpret_cast<const float*>(b) + 8 * i, first(valid - 8 * i));
  }
};

struct Bf16Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 64;
  static constexpr bool kTail = true;
  struct State {};
  static State state(const uint8_t*) { return {}; }
  static void chunk(const uint8_t* b, const State&, int, V8 (&v)[4]) {
    for (int i = 0; i < 4; ++i)
      v[i] = widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * i)));
  }
  static void tail(const uint8_t* b, int64_t valid, V8 (&v)[4]) {
    alignas(16) uint16_t t[32] = {};
    std::memcpy(t, b, size_t(std::clamp<int64_t>(valid, 0, 32)) * 2);
    chunk(reinterpret_cast<const uint8_t*>(t), {}, 0, v);
  }
};

struct Q8_0Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 34;
  static constexpr bool kTail = false;
  struct State {
    V8 d;
  };
  static State state(const uint8_t* b) { return {_mm256_set1_ps(block_half(b))}; }
  static void chunk(const uint8_t* b, const State& s, int, V8 (&v)[4]) {
    for (int i = 0; i < 4; ++i) v[i] = _mm256_mul_ps(ints(bytes8(b + 2 + 8 * i), true), s.d);
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// q4_0 (d·q − 8d) and q4_1 (d·q + m): elements 0–15 are the low nibbles of the 16 bytes, 16–31
// their high nibbles.
template <sy_dtype T>
struct Q4Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = T == SY_DTYPE_Q4_0 ? 18 : 20;
  static constexpr bool kTail = false;
  struct State {
    V8 d, m;
  };
  static State state(const uint8_t* b) {
    const float d = block_half(b);
    return {_mm256_set1_ps(d), _mm256_set1_ps(T == SY_DTYPE_Q4_1 ? block_half(b + 2) : d * -8.f)};
  }
  static void chunk(const uint8_t* b, const State& s, int, V8 (&v)[4]) {
    const uint8_t* qs = b + (T == SY_DTYPE_Q4_0 ? 2 : 4);
    const __m256i low4 = _mm256_set1_epi32(15);
    for (int i = 0; i < 4; ++i) {
      __m256i q = _mm256_cvtepu8_epi32(bytes8(qs + 8 * (i & 1)));
      q = i < 2 ? _mm256_and_si256(q, low4) : _mm256_srli_epi32(q, 4);
      v[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s.d, s.m);
    }
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// q5_0 (d·(q − 16), −16d exact so one FMA rounds once) and q5_1 (d·q + m): q is the nibble
// (as q4_0's) plus 16 times the element's bit of the little-endian qh.
template <sy_dtype T>
struct Q5Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = T == SY_DTYPE_Q5_0 ? 22 : 24;
  static constexpr int kQh = T == SY_DTYPE_Q5_0 ? 2 : 4;  // qh's offset; qs follow it
  static constexpr bool kTail = false;
  struct State {
    V8 d, m;
    __m256i qh;
  };
  static State state(const uint8_t* b) {
    const float d = block_half(b);
    uint32_t qh;
    std::memcpy(&qh, b + kQh, 4);
    return {_mm256_set1_ps(d), _mm256_set1_ps(T == SY_DTYPE_Q5_1 ? block_half(b + 2) : d * -16.f),
            _mm256_set1_epi32(int(qh))};
  }
  static void chunk(const uint8_t* b, const State& s, int, V8 (&v)[4]) {
    const uint8_t* qs = b + kQh + 4;
    const __m256i low4 = _mm256_set1_epi32(15), one = _mm256_set1_epi32(1);
    for (int i = 0; i < 4; ++i) {
      const int first_element = 8 * i;  // elements 8i … 8i + 7 of the block
      __m256i q = _mm256_cvtepu8_epi32(bytes8(qs + 8 * (i & 1)));
      q = i < 2 ? _mm256_and_si256(q, low4) : _mm256_srli_epi32(q, 4);
      const __m256i shift = _mm256_add_epi32(_mm256_set1_epi32(first_element),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(s.qh, shift), one);
      q = _mm256_or_si256(q, _mm256_slli_epi32(bit, 4));
      v[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s.d, s.m);
    }
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// kvalues_iq4nl, and E2M1's values doubled (exact as integers; mxfp4 halves its scale).
inline __m128i iq4_values() {
  return _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
}
inline __m128i e2m1_doubled() {
  return _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
}

// 32 elements (nibbles of the 16 bytes at qs, as q4_0's) times `scale`: the nibbles index the 16
// signed values of `values` with pshufb, and each value times the scale rounds once, as the
// scalar product.
inline void iq4_lookup(const uint8_t* qs, V8 scale, V8 (&v)[4], __m128i values = iq4_values()) {
  const __m128i low4 = _mm_set1_epi8(15);
  for (int i = 0; i < 4; ++i) {
    __m128i q = bytes8(qs + 8 * (i & 1));
    q = _mm_and_si128(i < 2 ? q : _mm_srli_epi16(q, 4), low4);
    v[i] = _mm256_mul_ps(ints(_mm_shuffle_epi8(values, q), true), scale);
  }
}

// iq4_nl: d·kvalues_iq4nl[nibble].
struct Iq4NlRows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 18;
  static constexpr bool kTail = false;
  struct State {
    V8 d;
  };
  static State state(const uint8_t* b) { return {_mm256_set1_ps(block_half(b))}; }
  static void chunk(const uint8_t* b, const State& s, int, V8 (&v)[4]) {
    iq4_lookup(b + 2, s.d, v);
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// mxfp4: E2M1 values under the block's E8M0 scale, looked up as iq4_nl's (doubled values under
// half the scale: every product exact, as the scalar one).
struct Mxfp4Rows {
  static constexpr int kBlock = 32;
  static constexpr int64_t kBytes = 17;
  static constexpr bool kTail = false;
  struct State {
    V8 d;
  };
  static State state(const uint8_t* b) { return {_mm256_set1_ps(0.5f * e8m0_scale(b[0]))}; }
  static void chunk(const uint8_t* b, const State& s, int, V8 (&v)[4]) {
    iq4_lookup(b + 1, s.d, v, e2m1_doubled());
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// iq4_xs: sub-block c as iq4_nl under its scale d·(ls − 32) (rounded once, then each value).
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
  static void chunk(const uint8_t* b, const State& s, int c, V8 (&v)[4]) {
    iq4_lookup(b + 8 + 16 * c, _mm256_set1_ps(s.scale[c]), v);
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// q4_k / q5_k: 8 sub-blocks of 32, each d·sc·q − dmin·m (d·sc and dmin·m rounded once, as
// GGUF's); sub-block c takes the low (c even) or high nibbles of bytes 32·(c/2) … +31, and q5_k
// its fifth bit from bit c of qh[l].
template <sy_dtype T>
struct K4Rows {
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = T == SY_DTYPE_Q4_K ? 144 : 176;
  static constexpr bool kTail = false;
  struct State {
    float scale[8], min[8];
  };
  static State state(const uint8_t* b) {
    State s;
    const float d = block_half(b), dmin = block_half(b + 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scale_min_k4(j, b + 4, sc, m);
      s.scale[j] = d * float(sc);
      s.min[j] = -(dmin * float(m));
    }
    return s;
  }
  static void chunk(const uint8_t* b, const State& st, int c, V8 (&v)[4]) {
    const V8 s = _mm256_set1_ps(st.scale[c]), mn = _mm256_set1_ps(st.min[c]);
    const uint8_t* qs = b + (T == SY_DTYPE_Q4_K ? 16 : 48) + 32 * (c / 2);
    for (int i = 0; i < 4; ++i) {
      __m256i q = _mm256_cvtepu8_epi32(bytes8(qs + 8 * i));
      q = c & 1 ? _mm256_srli_epi32(q, 4) : _mm256_and_si256(q, _mm256_set1_epi32(15));
      if constexpr (T == SY_DTYPE_Q5_K) {
        const __m256i qh = _mm256_cvtepu8_epi32(bytes8(b + 16 + 8 * i));
        const __m256i bit = _mm256_and_si256(_mm256_srli_epi32(qh, c), _mm256_set1_epi32(1));
        q = _mm256_or_si256(q, _mm256_slli_epi32(bit, 4));
      }
      v[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), s, mn);
    }
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// q6_k: 256 elements, halves of 128, each four groups k of 32: element 128·hf + 32·k + l has the
// low (k < 2) or high nibble of ql[64·hf + l + (k odd ? 32 : 0)] and bits 2k of qh[32·hf + l],
// q − 32, times d·sc[8·hf + 2k + l / 16] (that product rounded once, then the element's).
struct Q6KRows {
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = 210;
  static constexpr bool kTail = false;
  struct State {
    float scale[16];
  };
  static State state(const uint8_t* b) {
    State s;
    const float d = block_half(b + 208);
    for (int j = 0; j < 16; ++j) s.scale[j] = d * float(int8_t(b[192 + j]));
    return s;
  }
  static void chunk(const uint8_t* b, const State& st, int c, V8 (&v)[4]) {
    const int hf = c / 4, k = c % 4;
    const uint8_t* ql = b + 64 * hf + (k & 1 ? 32 : 0);
    const uint8_t* qh = b + 128 + 32 * hf;
    for (int i = 0; i < 4; ++i) {
      __m256i l = _mm256_cvtepu8_epi32(bytes8(ql + 8 * i));
      l = k >= 2 ? _mm256_srli_epi32(l, 4) : _mm256_and_si256(l, _mm256_set1_epi32(15));
      const __m256i h = _mm256_and_si256(
          _mm256_srli_epi32(_mm256_cvtepu8_epi32(bytes8(qh + 8 * i)), 2 * k), _mm256_set1_epi32(3));
      const __m256i q =
          _mm256_sub_epi32(_mm256_or_si256(l, _mm256_slli_epi32(h, 4)), _mm256_set1_epi32(32));
      v[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(st.scale[8 * hf + 2 * k + i / 2]));
    }
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// q2_k and q3_k: chunk c is shift pair c % 4 of half c / 4 — 32 bytes of 2-bit values (bits 2·(c
// % 4)), sub-blocks 2c (elements 0-15) and 2c + 1 (16-31) — with GGUF's formulas: q2_k
// d·sc·q − dmin·m (each factor rounded as the scalar's), q3_k d·(sc − 32)·(q − 4 unless the
// element's bit 4·(c / 4) + c % 4 of hmask is set).
template <sy_dtype T>
struct K23Rows {
  static constexpr bool kQ2 = T == SY_DTYPE_Q2_K;
  static constexpr int kBlock = 256;
  static constexpr int64_t kBytes = kQ2 ? 84 : 110;
  static constexpr bool kTail = false;
  using State = K23Factors;  // q2_k: d·(sc & 15), dmin·(sc >> 4); q3_k: d·(sc − 32), 0
  static State state(const uint8_t* b) { return k23_factors(T, b); }
  static void chunk(const uint8_t* b, const State& st, int c, V8 (&v)[4]) {
    const int shift = 2 * (c % 4);
    const uint8_t* q = b + (kQ2 ? 16 : 32) + 32 * (c / 4);
    const __m256i three = _mm256_set1_epi32(3);
    for (int i = 0; i < 4; ++i) {
      __m256i x = _mm256_and_si256(
          _mm256_srli_epi32(_mm256_cvtepu8_epi32(bytes8(q + 8 * i)), shift), three);
      const int sub = 2 * c + i / 2;
      if constexpr (kQ2) {
        v[i] = _mm256_sub_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(x), _mm256_set1_ps(st.scale[sub])),
                             _mm256_set1_ps(st.min[sub]));
      } else {
        const int bit = 4 * (c / 4) + c % 4;
        const __m256i high = _mm256_and_si256(
            _mm256_srli_epi32(_mm256_cvtepu8_epi32(bytes8(b + 8 * i)), bit), _mm256_set1_epi32(1));
        // q − 4 when the high bit is clear: q − 4 + 4·high.
        x = _mm256_add_epi32(_mm256_sub_epi32(x, _mm256_set1_epi32(4)), _mm256_slli_epi32(high, 2));
        v[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(x), _mm256_set1_ps(st.scale[sub]));
      }
    }
  }
  static void tail(const uint8_t*, int64_t, V8 (&)[4]) {}
};

// ---- decode-sized M: tiles over decoded registers ----------------------------------------------

// RN weight rows × RM x rows from m0, over the whole of K.
template <class D, int RN, int RM>
void tile(const RowdotArgs& a, const uint8_t* w, int64_t row_bytes, int64_t n, int64_t m0,
          Sweep& sweep) {
  const int64_t K = a.K, blocks = K / D::kBlock;
  V8 acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm256_setzero_ps();
  }
  auto madd = [&](int r, const V8(&v)[4], const float* x0) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) {
      SY_TILE_LOOP
      for (int i = 0; i < 4; ++i)
        acc[r][m] = _mm256_fmadd_ps(v[i], _mm256_loadu_ps(x0 + m * K + 8 * i), acc[r][m]);
    }
  };
  for (int64_t b = 0; b < blocks; ++b) {
    sweep.reach(w + (RN - 1) * row_bytes + b * D::kBytes);
    typename D::State st[RN];
    SY_TILE_LOOP
    for (int r = 0; r < RN; ++r) st[r] = D::state(w + r * row_bytes + b * D::kBytes);
    for (int c = 0; c < D::kBlock / 32; ++c) {
      const float* x0 = a.xf + m0 * K + b * D::kBlock + 32 * c;
      SY_TILE_LOOP
      for (int r = 0; r < RN; ++r) {
        V8 v[4];
        D::chunk(w + r * row_bytes + b * D::kBytes, st[r], c, v);
        madd(r, v, x0);
      }
    }
  }
  if constexpr (D::kTail) {
    const int64_t k = blocks * D::kBlock, valid = K - k;
    if (valid > 0) {
      alignas(32) float x[RM][32] = {};
      for (int m = 0; m < RM; ++m) std::memcpy(x[m], a.xf + (m0 + m) * K + k, size_t(valid) * 4);
      for (int r = 0; r < RN; ++r) {
        V8 v[4];
        D::tail(w + r * row_bytes + blocks * D::kBytes, valid, v);
        for (int m = 0; m < RM; ++m)  // the chunks with elements only: as rowdot_lanes' tail
          for (int i = 0; 8 * i < valid; ++i)
            acc[r][m] = _mm256_fmadd_ps(v[i], _mm256_load_ps(x[m] + 8 * i), acc[r][m]);
      }
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) lane_store(a, m0 + m, n + r, Avx2Lanes::sum(acc[r][m]));
  }
}

template <class D>
void direct(const RowdotArgs& a, int64_t n0, int64_t n1) {
  const int64_t row_bytes = row_bytes_of<D>(a.K);
  const auto* w = static_cast<const uint8_t*>(a.w);
  Sweep sweep(w + n0 * row_bytes);
  auto over_m = [&](auto rn, int64_t n) {
    constexpr int RN = decltype(rn)::value;
    int64_t m = 0;
    for (; m + kDirectRows <= a.M; m += kDirectRows)
      tile<D, RN, kDirectRows>(a, w + n * row_bytes, row_bytes, n, m, sweep);
    for (; m < a.M; ++m) tile<D, RN, 1>(a, w + n * row_bytes, row_bytes, n, m, sweep);
  };
  int64_t n = n0;
  for (; n + kTileRows <= n1; n += kTileRows) over_m(std::integral_constant<int, kTileRows>{}, n);
  for (; n < n1; ++n) over_m(std::integral_constant<int, 1>{}, n);
}

// ---- larger M: a decoded panel in L1, tiled by rowdot_lanes.hpp --------------------------------

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
      for (int c = 0; c < D::kBlock / 32; ++c) {
        V8 v[4];
        D::chunk(row + b * D::kBytes, st, c, v);
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + b * D::kBlock + 32 * c + 8 * i, v[i]);
      }
    }
    if constexpr (D::kTail) {
      const int64_t k = blocks * D::kBlock, valid = K - k;
      if (valid > 0) {
        V8 v[4];
        D::tail(row + blocks * D::kBytes, valid, v);
        alignas(32) float t[32];
        for (int i = 0; i < 4; ++i) _mm256_store_ps(t + 8 * i, v[i]);
        std::memcpy(out + k, t, size_t(valid) * 4);
      }
    }
  }
}

template <class D>
void columns_t(const RowdotArgs& a, int64_t n0, int64_t n1) {
  if (a.M <= kDirectRows) return direct<D>(a, n0, n1);
  constexpr bool in_place = std::is_same_v<D, F32Rows>;
  const int64_t row_bytes = row_bytes_of<D>(a.K);
  const auto* w = static_cast<const uint8_t*>(a.w);
  float* panel = in_place ? nullptr
                          : static_cast<float*>(tier_scratch(
                                ScratchSlot::panel, sizeof(float) * size_t(kLanePanelRows * a.K)));
  for (int64_t m0 = 0; m0 < a.M; m0 += kLaneXBlock) {
    const int64_t m1 = std::min(a.M, m0 + kLaneXBlock);
    Sweep sweep(w + n0 * row_bytes);  // each block of x rows reads the weights once, in order
    for (int64_t nb = n0; nb < n1; nb += kLanePanelRows) {
      const int64_t rows = std::min(kLanePanelRows, n1 - nb);
      const float* p = reinterpret_cast<const float*>(w + nb * row_bytes);
      if (in_place) sweep.reach(w + (nb + rows) * row_bytes - 1);
      if (!in_place) {
        fill_panel<D>(w + nb * row_bytes, row_bytes, a.K, rows, panel, sweep);
        p = panel;
      }
      lane_tiles<Avx2Lanes>(a, p, a.K, rows, nb, m0, m1);
    }
  }
}

void columns(const RowdotArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case SY_DTYPE_F32: return columns_t<F32Rows>(a, n0, n1);
    case SY_DTYPE_BF16: return columns_t<Bf16Rows>(a, n0, n1);
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
    // A block type without a decoder of its own (none today): rowdot_lanes.hpp's loops on 8
    // lanes, as in the avx512 tier.
    default:
      if (sy_dtype_is_blocked(a.wtype)) return lane_columns<Avx2Lanes>(a, quant_avx2(), n0, n1);
      return;
  }
}

const RowdotTier kTier = {"avx2", columns, lane_reads_bf16, kLanePanelRows};

}  // namespace

const RowdotTier& rowdot_avx2() {
  return kTier;
}

}  // namespace sy::cpu
