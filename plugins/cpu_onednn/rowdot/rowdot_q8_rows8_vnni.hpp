// Decode-sized steps of rowdot_q8.hpp on AVX512-VNNI: 8 weight rows against one row of x per
// pass, two rows to a 512-bit vpdpbusd per digit of x, the 8 exact block sums reduced together,
// and the 8 rows' scales (and offsets) gathered from their blocks in one instruction. The 4-row
// form of rowdot_q8_loops.hpp spent most of a block on one horizontal sum per 4 outputs and on
// scalar half-to-float conversions; this one does the same arithmetic per output (the exact Σ, then
// acc = fma(float(Σ), w_scale · d, acc) and off = fma(offset, s, off), the result acc + off), so
// a row's result is unchanged whichever form computed it (batch invariance, tested bit for bit).
// Shared by the vnni and amx files (each compiles it with its own flags). Internal linkage.
#pragma once

#include <algorithm>

#include "rowdot/rowdot_q8_panel_avx2.hpp"
#include "rowdot/rowdot_q8_vnni.hpp"

namespace sy::cpu {
namespace {

// The 8 int32 sums of 4 vectors whose halves are rows (p[i]: rows 2i, 2i+1; 8 lanes each), in
// row order. Integer sums are exact, so the order of the additions does not matter.
inline __m256i sum_rows8(const __m512i (&p)[4]) {
  const auto halves = [](__m512i a, __m512i b) {  // rows' two 128-bit quarters added
    return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  };
  const __m512i lo = halves(p[0], p[1]), hi = halves(p[2], p[3]);  // quarter k: row k, row 4+k
  __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(lo, hi), _mm512_unpackhi_epi64(lo, hi));
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));  // lanes 0, 2: rows k, 4+k
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
}

// Weight rows [n, n + 8) against row m of x: y[m][n..n+8).
template <class D>
void q8_rows8(const RowdotQ8Args& a, const uint8_t* w, int64_t row_bytes, int64_t n, int64_t m) {
  const int64_t blocks = a.K / 32;
  const Q16Block* x = a.xq + m * blocks;
  const __m256i rows = _mm256_mullo_epi32(_mm256_set1_epi32(int(row_bytes)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  alignas(32) float s0[8][8], s1[8][8], coeff[8][8];
  __m256 acc = _mm256_setzero_ps(), off = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    if (!D::kHalfFirst && b % 8 == 0)
      q8_scales8<__m256i, D>(w, row_bytes, b, std::min<int64_t>(8, blocks - b), s0, s1, coeff);
    // The two digits, each in both halves; q6_k also splits each into elements 0-15 and 16-31.
    const __m512i hi = _mm512_broadcast_i64x4(VnniQ8::load(x[b].hi)),
                  lo = _mm512_broadcast_i64x4(VnniQ8::load(x[b].lo));
    constexpr __mmask64 kLow = 0x0000ffff0000ffffull;
    // Per pair of rows, kQ16Radix·Σw·hi + Σw·lo in each row's 8 lanes; vpdpbusd takes u8 × s8,
    // so a signed w is taken as w + 128 and 128·ΣQ is taken off after the rows' sums (exact).
    const auto pair = [](__m512i wv, __m512i h, __m512i l) {
      const __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, h);
      return _mm512_dpbusd_epi32(_mm512_mullo_epi32(t, _mm512_set1_epi32(kQ16Radix)), wv, l);
    };
    __m512i dot[4], dot_hi[4];
    for (int i = 0; i < 4; ++i) {
      __m256i w0, w1;
      float unused[3];
      D::at(w + 2 * i * row_bytes, b, w0, unused[0], unused[1], unused[2]);
      D::at(w + (2 * i + 1) * row_bytes, b, w1, unused[0], unused[1], unused[2]);
      __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1);
      if constexpr (D::kSigned) wv = _mm512_xor_si512(wv, _mm512_set1_epi8(char(0x80)));
      if constexpr (D::kHalves) {  // elements 0-15 and 16-31 of each row apart
        dot[i] = pair(wv, _mm512_maskz_mov_epi8(kLow, hi), _mm512_maskz_mov_epi8(kLow, lo));
        dot_hi[i] = pair(wv, _mm512_maskz_mov_epi8(~kLow, hi), _mm512_maskz_mov_epi8(~kLow, lo));
      } else {
        dot[i] = pair(wv, hi, lo);
      }
    }
    // The 8 rows' exact sums, less 128·ΣQ (of each half, for q6_k) for a signed w.
    const auto sums = [&](const __m512i(&p)[4], int32_t sum_q) {
      const __m256i s8 = sum_rows8(p);
      return _mm256_cvtepi32_ps(D::kSigned ? _mm256_sub_epi32(s8, _mm256_set1_epi32(128 * sum_q))
                                           : s8);
    };
    __m256 scale, offset;
    if constexpr (D::kHalfFirst) {
      const __m256i h =
          _mm256_i32gather_epi32(reinterpret_cast<const int*>(w + D::kBlockBytes * b), rows, 1);
      scale = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(h));
      offset = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(h, 16)));
    } else {
      scale = _mm256_load_ps(s0[b % 8]);
      offset = _mm256_load_ps(coeff[b % 8]);
    }
    const __m256 d = _mm256_set1_ps(x[b].d);
    const int32_t* sum_half = x[b].sum_half;
    if constexpr (D::kHalves) {
      acc = _mm256_fmadd_ps(sums(dot, sum_half[0]), _mm256_mul_ps(scale, d), acc);
      acc = _mm256_fmadd_ps(sums(dot_hi, sum_half[1]), _mm256_mul_ps(_mm256_load_ps(s1[b % 8]), d),
                            acc);
    } else {
      acc = _mm256_fmadd_ps(sums(dot, sum_half[0] + sum_half[1]), _mm256_mul_ps(scale, d), acc);
    }
    if constexpr (D::kOffset) off = _mm256_fmadd_ps(offset, _mm256_set1_ps(x[b].s), off);
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_add_ps(acc, off));
  q8_store8(a, m, n, out);
}

// The panels' multiply-accumulate (rowdot_q8_panel_avx2.hpp) in one instruction.
struct VnniMac {
  static __m256i mac(__m256i sum, __m256i w, __m256i q) { return _mm256_dpwssd_epi32(sum, w, q); }
};

// The vnni tier's columns (and the amx tier's, below its tile rows): fewer than 4 rows of x
// through the 8-row form, more through panels.
inline void q8_columns_vnni(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  with_q8_decoder<VnniQ8>(a.wtype, [&](auto d) {
    using D = decltype(d);
    if (a.M < 4)
      q8_columns_by8<VnniQ8, D>(a, n0, n1, q8_rows8_avx2<D, VnniMac>);
    else
      q16_panel_columns<VnniQ8, D, VnniMac>(a, n0, n1);
  });
}

}  // namespace
}  // namespace sy::cpu
