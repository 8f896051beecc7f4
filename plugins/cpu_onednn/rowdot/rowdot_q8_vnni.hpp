// rowdot_q8.hpp on AVX512-VNNI: the integer dot of rowdot_q8_loops.hpp on vpdpbusd (four u8 × s8
// products into each int32 lane in one instruction; AVX2 takes two and a constant), and the
// 16-bit forms of AVX2 (rowdot_q8_rows8_avx2.hpp for decode-sized steps, rowdot_q8_panel_avx2.hpp
// for many rows of x) with vpdpwssd, which multiplies 16-bit pairs and accumulates in one
// instruction. The 8-row form first took the two 8-bit digits of x on 512-bit vpdpbusd; widening
// the weights to 16 bits and multiplying Q itself measured 1.2-1.4× faster at M = 1 (AMD EPYC
// family 25 model 17, docs/numerics.md), so that form is gone.
// Shared by the vnni and amx files (each compiles it with its own flags). Internal linkage.
#pragma once

#include "rowdot/rowdot_q8_panel_avx2.hpp"

namespace sy::cpu {
namespace {

struct VnniQ8 : Avx2Q8 {
  static L digits_u(B w, B hi, B lo) {
    const L t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, hi);
    return _mm256_dpbusd_epi32(_mm256_mullo_epi32(t, _mm256_set1_epi32(kQ16Radix)), w, lo);
  }
  static L dot_u(B w, const Q16Block& x) { return digits_u(w, load(x.hi), load(x.lo)); }
  static L dot_s(B w, const Q16Block& x) {
    return digits_u(_mm256_sign_epi8(w, w), _mm256_sign_epi8(load(x.hi), w),
                    _mm256_sign_epi8(load(x.lo), w));
  }
  // q5_0 / q5_1 as Avx2Q8::q5, the fifth bits taken as a byte mask (AVX512-BW) in one step.
  static B q5(const uint8_t* qs, const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    const B low = nibbles(qs);
    return _mm256_mask_add_epi8(low, __mmask32(bits), low, _mm256_set1_epi8(16));
  }
};

// The 16-bit forms' multiply-accumulate in one instruction, and two panels (16 weight rows)
// against rows of x on 512-bit vectors (q16_panels_against_x takes it for NP = 2).
struct VnniMac {
  static __m256i mac(__m256i sum, __m256i w, __m256i q) { return _mm256_dpwssd_epi32(sum, w, q); }
  // mac into a loop's running sum, written as an instruction whose destination is the sum:
  // GCC 12 otherwise copies the sum into a fresh register before each vpdpwssd and back after
  // it, two vmovdqa per multiply-accumulate (Avx2Mac::accumulate has the same reason).
  static __m256i accumulate(__m256i sum, __m256i w, __m256i q) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(sum) : "v"(w), "v"(q));
    return sum;
  }
  static __m512i accumulate(__m512i sum, __m512i w, __m512i q) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(sum) : "v"(w), "v"(q));
    return sum;
  }

  static constexpr bool kTwoPanelsWide = true;

  // Σ over activation pairs [j0, j1) of block b of RX rows of x against both panels, lane r
  // of sum[m] weight row r of the 16.
  template <int RX>
  static void two_panel_sums(const Q16Panel* p, int64_t b, const Q16Block* const (&xb)[RX], int j0,
                             int j1, __m512i (&sum)[RX]) {
    for (int m = 0; m < RX; ++m) sum[m] = _mm512_setzero_si512();
    for (int j = j0; j < j1; ++j) {
      const __m512i w = _mm512_load_si512(p[0].w(b, j));  // p[1]'s vector j follows p[0]'s
      for (int m = 0; m < RX; ++m) {
        int32_t pair;
        std::memcpy(&pair, xb[m]->q + 2 * j, sizeof pair);
        sum[m] = accumulate(sum[m], w, _mm512_set1_epi32(pair));
      }
    }
  }

  // Rows [m, m + RX) of x against the two filled panels of weight rows [n, n + 16): the 256-bit
  // q16_panel_rows' arithmetic lane for lane (the same integer sums, then per output
  // acc = fma(float(Σ), scale · d, acc), off = fma(offset, s, off), the result acc + off), on
  // half the instructions.
  template <class D, int RX>
  static void two_panels(const RowdotQ8Args& a, const Q16Panel* p, int64_t n, int64_t m,
                         PanelAhead ahead) {
    const int64_t blocks = a.K / 32;
    __m512 acc[RX], off[RX];
    for (int i = 0; i < RX; ++i) acc[i] = off[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const Q16Block* xb[RX];
      for (int i = 0; i < RX; ++i) xb[i] = a.xq + (m + i) * blocks + b;
      ahead.fetch(b);
      __m512i sum[RX];
      two_panel_sums<RX>(p, b, xb, 0, D::kHalves ? 8 : 16, sum);
      const __m512 s0 = _mm512_load_ps(&p[0].s0(b));
      for (int i = 0; i < RX; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[i]),
                                 _mm512_mul_ps(s0, _mm512_set1_ps(xb[i]->d)), acc[i]);
      if constexpr (D::kHalves) {
        two_panel_sums<RX>(p, b, xb, 8, 16, sum);
        const __m512 s1 = _mm512_load_ps(&p[0].s1(b));
        for (int i = 0; i < RX; ++i)
          acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[i]),
                                   _mm512_mul_ps(s1, _mm512_set1_ps(xb[i]->d)), acc[i]);
      }
      if constexpr (D::kOffset) {
        const __m512 coeff = _mm512_load_ps(&p[0].coeff(b));
        for (int i = 0; i < RX; ++i)
          off[i] = _mm512_fmadd_ps(coeff, _mm512_set1_ps(xb[i]->s), off[i]);
      }
    }
    store16(a, n, m, acc, off);
  }

  template <int RX>
  static void store16(const RowdotQ8Args& a, int64_t n, int64_t m, const __m512 (&acc)[RX],
                      const __m512 (&off)[RX]) {
    for (int i = 0; i < RX; ++i) {
      alignas(64) float out[16];
      _mm512_store_ps(out, _mm512_add_ps(acc[i], off[i]));
      q8_store8(a, m + i, n, reinterpret_cast<const float(&)[8]>(out[0]));
      q8_store8(a, m + i, n + 8, reinterpret_cast<const float(&)[8]>(out[8]));
    }
  }

  // Group a's 8 lanes and group b's (lanes 8-15) as one vector.
  static __m512 join16(__m256 a, __m256 b) {
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(a)), _mm256_castps_pd(b), 1));
  }

  // Rows [m, m + RX) of x against the packed groups of weight rows [n, n + 8) at ga and
  // [n + 8, n + 16) at gb, read as they are stored: the pair vectors are widened here, block by
  // block, instead of into panels first (a panel filled for a few rows of x cost about half of
  // their products: its stores and reloads). The integers and float steps are two_panels': the
  // bias comes off the sums as kBias·ΣQ (rows8_packed's way; the panels take it off the widened
  // weights: the same integers), then acc = fma(float(Σ), scale · d, acc), off = fma(offset,
  // s, off), the result acc + off.
  template <class D, int RX>
  static void two_groups(const RowdotQ8Args& a, const uint8_t* ga, const uint8_t* gb, int64_t n,
                         int64_t m) {
    using P = Rows8Packed<D>;
    static_assert(!D::kHalves);
    const int64_t blocks = a.K / 32;
    __m512 acc[RX], off[RX];
    for (int i = 0; i < RX; ++i) acc[i] = off[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t *ba = P::block(ga, b), *bb = P::block(gb, b);
      for (int64_t o = 0; o < kRows8BytesPerBlock<P>; o += 64) {
        _mm_prefetch(rows8_ahead<P>(ga, b + 8) + o, _MM_HINT_T0);
        _mm_prefetch(rows8_ahead<P>(gb, b + 8) + o, _MM_HINT_T0);
      }
      const Q16Block* xb[RX];
      for (int i = 0; i < RX; ++i) xb[i] = a.xq + (m + i) * blocks + b;
      __m256i wa[16];
      P::pairs(ba, [&](int j, __m256i v) { wa[j] = v; });
      __m512i sum[RX];
      for (int i = 0; i < RX; ++i) sum[i] = _mm512_setzero_si512();
      P::pairs(bb, [&](int j, __m256i v) {
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(wa[j]), v, 1);
        for (int i = 0; i < RX; ++i) {
          int32_t pair;
          std::memcpy(&pair, xb[i]->q + 2 * j, sizeof pair);
          sum[i] = accumulate(sum[i], w, _mm512_set1_epi32(pair));
        }
      });
      const __m512 s0 = join16(P::scale(ga, b), P::scale(gb, b));
      for (int i = 0; i < RX; ++i) {
        if constexpr (P::kBias != 0)
          sum[i] = _mm512_sub_epi32(
              sum[i], _mm512_set1_epi32(P::kBias * (xb[i]->sum_half[0] + xb[i]->sum_half[1])));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[i]),
                                 _mm512_mul_ps(s0, _mm512_set1_ps(xb[i]->d)), acc[i]);
      }
      if constexpr (D::kOffset) {
        const __m512 coeff = join16(P::offset(ga, b), P::offset(gb, b));
        for (int i = 0; i < RX; ++i)
          off[i] = _mm512_fmadd_ps(coeff, _mm512_set1_ps(xb[i]->s), off[i]);
      }
    }
    store16(a, n, m, acc, off);
  }
};

}  // namespace
}  // namespace sy::cpu
