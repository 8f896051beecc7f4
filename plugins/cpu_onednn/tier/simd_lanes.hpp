// Vectors of f32 lanes with one fixed arithmetic per operation, for the kernels whose results
// must not depend on how work is grouped (rowdot_lanes.hpp, attention_paged_loops.hpp): every
// multiply-add is one instruction chosen here (a fused multiply-add where the tier has one; the
// portable lanes multiply, round, then add). GCC writes the intrinsics' mul, add and sub as
// vector operators, so under its default -ffp-contract=fast a mul that feeds an add or a sub
// may be fused as well (exp_lanes' range reduction is, on the FMA tiers): that is a property of
// the code, the same wherever it is inlined, so a row's result still does not depend on its
// company (the BatchInvariance tests check it bit for bit). `sum` halves (lanes L/2…L−1 onto
// 0…L/2−1, and so on); `sum_each` has a fixed tree of its own. Each tier file sees only the
// lanes its flags allow. Internal linkage (scalar_math.hpp says why).
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>

#include "tier/scalar_math.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace sy::cpu {
namespace {

// 8 lanes of baseline x86-64: loops the compiler may vectorise, but with no fused multiply-add
// in the instruction set it cannot contract madd.
struct PortableLanes {
  static constexpr int kLanes = 8;
  struct V {
    float l[8];
  };
  static V zero() { return V{}; }
  static V set1(float x) {
    V v;
    for (float& e : v.l) e = x;
    return v;
  }
  static V load(const float* p) {
    V v;
    std::memcpy(v.l, p, sizeof v.l);
    return v;
  }
  static void store(float* p, V v) { std::memcpy(p, v.l, sizeof v.l); }
  static V add(V a, V b) {
    for (int i = 0; i < 8; ++i) a.l[i] += b.l[i];
    return a;
  }
  static V sub(V a, V b) {
    for (int i = 0; i < 8; ++i) a.l[i] -= b.l[i];
    return a;
  }
  static V mul(V a, V b) {
    for (int i = 0; i < 8; ++i) a.l[i] *= b.l[i];
    return a;
  }
  static V madd(V a, V b, V acc) {
    for (int i = 0; i < 8; ++i) {
      const float product = a.l[i] * b.l[i];
      acc.l[i] += product;
    }
    return acc;
  }
  static float sum(V v) {
    for (int width = 4; width > 0; width /= 2)
      for (int i = 0; i < width; ++i) v.l[i] += v.l[i + width];
    return v.l[0];
  }
  static V exp(V v) {
    for (float& e : v.l) e = exp_f32(e);
    return v;
  }
  // Lanes lo..hi of v (0 <= lo <= hi < kLanes), the others −inf.
  static V keep(V v, int lo, int hi) {
    for (int i = 0; i < 8; ++i)
      v.l[i] = select_f32(i >= lo && i <= hi, v.l[i], -std::numeric_limits<float>::infinity());
    return v;
  }
  // The largest lane: max is exact, so any order of comparisons gives it (a NaN lane may or may
  // not win; the row's result is NaN either way).
  static float max_lanes(V v) {
    float m = v.l[0];
    for (int i = 1; i < 8; ++i) m = std::max(m, v.l[i]);
    return m;
  }
  // Lane j = the sum of v[j]'s lanes (each by halving, as sum()).
  static V sum_each(const V (&v)[8]) {
    V out;
    for (int j = 0; j < 8; ++j) out.l[j] = sum(v[j]);
    return out;
  }
};

// e^x lane by lane: exp_f32's steps (Cephes' polynomial after range reduction by ln 2; exactly 0
// below −87.3, +inf above 88.3) on a tier's vectors.
template <class Ops>
inline typename Ops::V exp_lanes(typename Ops::V x) {
  using V = typename Ops::V;
  // Clamped with x second: NaN passes through min and max (their second operand) and stays NaN.
  const V c = Ops::min(Ops::set1(88.3f), Ops::max(Ops::set1(-87.3f), x));
  const V round = Ops::set1(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V n = Ops::sub(Ops::madd(c, Ops::set1(1.44269504088896341f), round), round);
  V r = Ops::sub(c, Ops::mul(n, Ops::set1(0.693359375f)));
  r = Ops::sub(r, Ops::mul(n, Ops::set1(-2.12194440e-4f)));
  V p = Ops::set1(1.9875691500e-4f);
  p = Ops::madd(p, r, Ops::set1(1.3981999507e-3f));
  p = Ops::madd(p, r, Ops::set1(8.3334519073e-3f));
  p = Ops::madd(p, r, Ops::set1(4.1665795894e-2f));
  p = Ops::madd(p, r, Ops::set1(1.6666665459e-1f));
  p = Ops::madd(p, r, Ops::set1(5.0000001201e-1f));
  p = Ops::add(Ops::madd(Ops::mul(p, r), r, r), Ops::set1(1.0f));
  return Ops::exp_tail(x, Ops::mul(p, Ops::pow2(n)));
}

#if defined(__AVX2__) && defined(__FMA__)
struct Avx2Lanes {
  static constexpr int kLanes = 8;
  using V = __m256;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V madd(V a, V b, V acc) { return _mm256_fmadd_ps(a, b, acc); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  // 2^n for the integers n holds.
  static V pow2(V n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  // e where x is in range, +inf above 88.3, 0 below −87.3 (and for −inf).
  static V exp_tail(V x, V e) {
    e = _mm256_blendv_ps(e, _mm256_set1_ps(std::numeric_limits<float>::infinity()),
                         _mm256_cmp_ps(x, _mm256_set1_ps(88.3f), _CMP_GT_OQ));
    return _mm256_blendv_ps(e, _mm256_setzero_ps(),
                            _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ));
  }
  static V exp(V x) { return exp_lanes<Avx2Lanes>(x); }
  static V keep(V v, int lo, int hi) {
    const __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), i),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32(hi + 1), i));
    return _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()), v,
                            _mm256_castsi256_ps(in));
  }
  static float max_lanes(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
  // Lane j = the sum of v[j]'s lanes: pairs (hadd), then quads (hadd), then the two halves.
  static V sum_each(const V (&v)[8]) {
    const __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20),
                         _mm256_permute2f128_ps(q0, q1, 0x31));
  }
};
#endif

#if defined(__AVX512F__)
struct Avx512Lanes {
  static constexpr int kLanes = 16;
  using V = __m512;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V madd(V a, V b, V acc) { return _mm512_fmadd_ps(a, b, acc); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static float sum(V v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static V pow2(V n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static V exp_tail(V x, V e) {
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.3f), _CMP_GT_OQ),
                           _mm512_set1_ps(std::numeric_limits<float>::infinity()));
    return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ),
                              _mm512_setzero_ps());
  }
  static V exp(V x) { return exp_lanes<Avx512Lanes>(x); }
  static V keep(V v, int lo, int hi) {
    const __mmask16 in = __mmask16(((2u << hi) - 1u) & ~((1u << lo) - 1u));
    return _mm512_mask_mov_ps(_mm512_set1_ps(-std::numeric_limits<float>::infinity()), in, v);
  }
  static float max_lanes(V v) {
    const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
  // Lane j = the sum of v[j]'s lanes by avx2's tree on its two 256-bit halves added: a_i = v_i +
  // v_(i+8), then ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)). Each level adds two
  // shuffles of two vectors (the even and the odd positions, keys side by side), so 16 keys
  // take 30 shuffles and 15 additions (256-bit horizontal additions took about 75 operations,
  // most of them shuffles).
  static V sum_each(const V (&v)[16]) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const auto pairs = [&](V x, V y) {
      return _mm512_add_ps(_mm512_permutex2var_ps(x, even, y), _mm512_permutex2var_ps(x, odd, y));
    };
    V a[8];  // lanes 0-7: key j's a_i; 8-15: key j + 8's
    for (int j = 0; j < 8; ++j)
      a[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[j], v[j + 8], 0x44),
                           _mm512_shuffle_f32x4(v[j], v[j + 8], 0xEE));
    V b[4];  // pairs of 4 lanes: keys j, j + 8, j + 4, j + 12
    for (int j = 0; j < 4; ++j) b[j] = pairs(a[j], a[j + 4]);
    V c[2];  // pairs of 2 lanes: keys j, j + 8, j + 4, j + 12, j + 2, j + 10, j + 6, j + 14
    for (int j = 0; j < 2; ++j) c[j] = pairs(b[j], b[j + 2]);
    // c[0] holds the even keys' two halves, c[1] the odd keys': each key's pair, in key order.
    const __m512i lo = _mm512_setr_epi32(0, 16, 8, 24, 4, 20, 12, 28, 2, 18, 10, 26, 6, 22, 14, 30);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(1));
    return _mm512_add_ps(_mm512_permutex2var_ps(c[0], lo, c[1]),
                         _mm512_permutex2var_ps(c[0], hi, c[1]));
  }
};
#endif

}  // namespace
}  // namespace sy::cpu
