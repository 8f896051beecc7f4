// The 256-bit integer dot of rowdot_q8_loops.hpp on AVX2 (maddubs + madd), shared by the avx2
// and VNNI files (each compiles it with its own flags). Internal linkage.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "rowdot/rowdot_q8_loops.hpp"

namespace sy::cpu {
namespace {

struct Avx2Q8 {
  using B = __m256i;
  using L = __m256i;
  static B load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static B mask4(B b) { return _mm256_and_si256(b, _mm256_set1_epi8(0x0f)); }
  static B nibbles(const uint8_t* qs) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    return mask4(_mm256_set_m128i(_mm_srli_epi16(t, 4), t));
  }
  static B low(const uint8_t* p) { return mask4(load(p)); }
  static B high(const uint8_t* p) { return mask4(_mm256_srli_epi16(load(p), 4)); }
  static B q6(const uint8_t* ql, bool hi, const uint8_t* qh, int shift) {
    const B h =
        _mm256_and_si256(_mm256_srl_epi16(load(qh), _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(3));
    return _mm256_or_si256(hi ? high(ql) : low(ql), _mm256_slli_epi16(h, 4));
  }
  // q5_0 / q5_1: the nibbles (as nibbles()) with element i's fifth bit, bit i of qh, as 16.
  static B q5(const uint8_t* qs, const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    const B spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(int(bits)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const B set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
                                    _mm256_set1_epi64x(-1));
    return _mm256_or_si256(nibbles(qs), _mm256_and_si256(set, _mm256_set1_epi8(16)));
  }
  static B q5k(const uint8_t* ql, bool hi, const uint8_t* qh, int bit) {
    const B h =
        _mm256_and_si256(_mm256_srl_epi16(load(qh), _mm_cvtsi32_si128(bit)), _mm256_set1_epi8(1));
    return _mm256_or_si256(hi ? high(ql) : low(ql), _mm256_slli_epi16(h, 4));
  }
  // kvalues_iq4nl (vocabulary.h's sy_iq4nl_value) looked up by nibble in each 128-bit half.
  static B iq4_table() {
    return _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
                            113, -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69,
                            89, 113);
  }
  static B iq4(const uint8_t* qs) { return _mm256_shuffle_epi8(iq4_table(), nibbles(qs)); }
  static B sub(B w, int c) { return _mm256_sub_epi8(w, _mm256_set1_epi8(char(c))); }
  // kQ16Radix·Σ w·hi + Σ w·lo per lane. No pair of products saturates int16 (|w| <= 128 and
  // |x| <= 127, or w <= 63 unsigned), and madd's int16 weights take the radix for free.
  static L digits_u(B w, B hi, B lo) {
    return _mm256_add_epi32(
        _mm256_madd_epi16(_mm256_maddubs_epi16(w, hi), _mm256_set1_epi16(kQ16Radix)),
        _mm256_madd_epi16(_mm256_maddubs_epi16(w, lo), _mm256_set1_epi16(1)));
  }
  static L dot_u(B w, const Q16Block& x) { return digits_u(w, load(x.hi), load(x.lo)); }
  static L dot_s(B w, const Q16Block& x) {
    return digits_u(_mm256_sign_epi8(w, w), _mm256_sign_epi8(load(x.hi), w),
                    _mm256_sign_epi8(load(x.lo), w));
  }
  static L zero_l() { return _mm256_setzero_si256(); }
  // Four outputs' sums: Σ of each of the 4 lane vectors (halves: lanes 0-3, 4-7 apart).
  using V4 = __m128;
  static void sum4_halves(const L* d, V4& lo, V4& hi) {
    const L h = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    lo = _mm_cvtepi32_ps(_mm256_castsi256_si128(h));
    hi = _mm_cvtepi32_ps(_mm256_extracti128_si256(h, 1));
  }
  static V4 sum4(const L* d) {
    const L h = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    return _mm_cvtepi32_ps(
        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
  }
  static V4 zero4() { return _mm_setzero_ps(); }
  static V4 load4(const float* p) { return _mm_loadu_ps(p); }
  static void store4(float* p, V4 v) { _mm_storeu_ps(p, v); }
  static V4 mul4(V4 a, V4 b) { return _mm_mul_ps(a, b); }
  static V4 add4(V4 a, V4 b) { return _mm_add_ps(a, b); }
  static V4 fmadd4(V4 a, V4 b, V4 c) { return _mm_fmadd_ps(a, b, c); }
  static float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
  }
  // 32 int32 values in [−127, 127] (v[0] elements 0-7, …) as bytes in element order.
  static void store_bytes(const __m256i (&v)[4], int8_t* out) {
    const __m256i b =
        _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(b, order));
  }
  static int32_t sum8(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
  }
  static void quantize(const float* x, Q16Block& out) {
    const __m256 sign = _mm256_set1_ps(-0.f);
    __m256 v[4], amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const bool has_nan = _mm256_movemask_ps(nan) != 0;
    const float d = has_nan ? std::nanf("") : _mm_cvtss_f32(m) / float(kQ16Max);
    const __m256 id = _mm256_set1_ps(!has_nan && d != 0.f ? 1.f / d : 0.f);
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i qs[4], hi[4], lo[4], sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int i = 0; i < 4; ++i) {
      const __m256i q = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), kNearest));
      hi[i] = _mm256_cvtps_epi32(_mm256_round_ps(
          _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(1.f / float(kQ16Radix))), kNearest));
      lo[i] = _mm256_sub_epi32(q, _mm256_mullo_epi32(hi[i], _mm256_set1_epi32(kQ16Radix)));
      sum[i / 2] = _mm256_add_epi32(sum[i / 2], q);
      qs[i] = q;
    }
    for (int i = 0; i < 2; ++i)  // packs interleaves the 128-bit halves; permute puts them back
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q + 16 * i),
                          _mm256_permute4x64_epi64(_mm256_packs_epi32(qs[2 * i], qs[2 * i + 1]),
                                                   _MM_SHUFFLE(3, 1, 2, 0)));
    store_bytes(hi, out.hi);
    store_bytes(lo, out.lo);
    out.sum_half[0] = sum8(sum[0]);
    out.sum_half[1] = sum8(sum[1]);
    out.d = d;
    out.s = d * float(out.sum_half[0] + out.sum_half[1]);
  }
};

}  // namespace
}  // namespace sy::cpu
