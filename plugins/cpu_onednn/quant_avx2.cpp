// The block-quantized loops (quant_loops.hpp) compiled for the avx2 tier, and hand-written
// one-token dot products for the 32-element types (q8_0, q4_0, q4_1), which the compiler's
// vectorisation of quant_loops.hpp runs far below the memory bandwidth. Only this file's flags
// allow its instructions; quant_tier() calls it only on a CPU that has them.
#include <immintrin.h>

#include "quant_loops.hpp"

namespace sy::cpu {
namespace {

inline __m256 widen8(__m128i bytes, bool is_signed) {
  return _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes));
}

// The 32 integers of a block as four vectors of f32 (see quant_avx512.cpp).
template <sy_dtype T>
inline void block_q(const uint8_t* blk, __m256 (&q)[4]) {
  if constexpr (T == SY_DTYPE_Q8_0) {
    const __m128i a = _mm_loadu_si128((const __m128i*)(blk + 2));
    const __m128i b = _mm_loadu_si128((const __m128i*)(blk + 18));
    q[0] = widen8(a, true);
    q[1] = widen8(_mm_srli_si128(a, 8), true);
    q[2] = widen8(b, true);
    q[3] = widen8(_mm_srli_si128(b, 8), true);
  } else {
    const __m128i v = _mm_loadu_si128((const __m128i*)(blk + (T == SY_DTYPE_Q4_0 ? 2 : 4)));
    const __m128i low = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(v, low), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low);
    q[0] = widen8(lo, false);
    q[1] = widen8(_mm_srli_si128(lo, 8), false);
    q[2] = widen8(hi, false);
    q[3] = widen8(_mm_srli_si128(hi, 8), false);
  }
}

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One token (M = 1), R rows side by side sharing x's loads: per row and block, t = Σ q·x over
// the block's four vectors (two chains), then one FMA by the block's scale d into one of two
// accumulators; the q4 offsets (q4_0 −8·d, q4_1 m) times the block's Σx go to scalar sums.
// (AVX2 has no 16-entry vpermps, so quant_avx512.cpp's table does not carry over.)
template <sy_dtype T, int R>
void rows_32(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = T == SY_DTYPE_Q8_0 ? 34 : T == SY_DTYPE_Q4_0 ? 18 : 20;
  const int64_t blocks = a.K / 32, rb = blocks * BB;
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m256 acc[R][2];
    float offset[R][2] = {};
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const float* x = a.x + b * 32;
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        __m256 q[4];
        block_q<T>(blk, q);
        __m256 t0 = _mm256_mul_ps(q[0], _mm256_loadu_ps(x));
        __m256 t1 = _mm256_mul_ps(q[1], _mm256_loadu_ps(x + 8));
        t0 = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(x + 16), t0);
        t1 = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(x + 24), t1);
        const float d = half_at(blk);
        acc[r][b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_add_ps(t0, t1), acc[r][b & 1]);
        if constexpr (T == SY_DTYPE_Q4_0) offset[r][b & 1] -= 8.f * d * a.xsum[b];
        if constexpr (T == SY_DTYPE_Q4_1) offset[r][b & 1] += half_at(blk + 2) * a.xsum[b];
      }
    }
    for (int r = 0; r < R; ++r) {
      const float v = hsum(_mm256_add_ps(acc[r][0], acc[r][1])) + (offset[r][0] + offset[r][1]);
      store_y(a, n + r, v);
    }
  }
  if constexpr (R > 1)
    if (n < n1) rows_32<T, 1>(a, n, n1);
}

// Eight bytes as eight i32 lanes.
inline __m256i lanes8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p));
}

// The eight 6-bit scales and mins of a q4_k / q5_k block (ggml's get_scale_min_k4, on 32-bit
// words): s[j] = d·sc_j, m[j] = dmin·m_j.
inline void k4_scales(const uint8_t* blk, float s[8], float m[8]) {
  uint32_t a, b, c;
  std::memcpy(&a, blk + 4, 4);
  std::memcpy(&b, blk + 8, 4);
  std::memcpy(&c, blk + 12, 4);
  const uint32_t w[4] = {a & 0x3f3f3f3f, (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030), b & 0x3f3f3f3f,
                         ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030)};
  uint8_t v[16];
  std::memcpy(v, w, 16);
  const float d = half_at(blk), dmin = half_at(blk + 2);
  for (int j = 0; j < 8; ++j) {
    s[j] = d * float(v[j]);
    m[j] = dmin * float(v[8 + j]);
  }
}

// One token over q4_k / q5_k, R rows side by side: per 32-element sub-block, t = Σ q·x (q the
// nibble, plus 16 for q5_k's fifth bit), then one FMA by d·sc; the −dmin·m offsets times the
// sub-block's Σx go to scalar sums.
template <sy_dtype T, int R>
void rows_k4(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = T == SY_DTYPE_Q4_K ? 144 : 176;
  const int64_t blocks = a.K / 256, rb = blocks * BB;
  const __m256i low4 = _mm256_set1_epi32(15), bit4 = _mm256_set1_epi32(16);
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m256 acc[R][2];
    float offset[R] = {};
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      const float* x = a.x + b * 256;
      const float* xsum = a.xsum + b * 8;
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        float sc[8], mn[8];
        k4_scales(blk, sc, mn);
        const uint8_t* qs = blk + (T == SY_DTYPE_Q4_K ? 16 : 48);
        for (int j = 0; j < 4; ++j) {
          __m256 t_lo = _mm256_setzero_ps(), t_hi = _mm256_setzero_ps();
          for (int e = 0; e < 32; e += 8) {
            const __m256i z = lanes8(qs + 32 * j + e);
            __m256i lo = _mm256_and_si256(z, low4), hi = _mm256_srli_epi32(z, 4);
            if constexpr (T == SY_DTYPE_Q5_K) {
              const __m256i h = lanes8(blk + 16 + e);
              lo =
                  _mm256_or_si256(lo, _mm256_and_si256(2 * j <= 4 ? _mm256_slli_epi32(h, 4 - 2 * j)
                                                                  : _mm256_srli_epi32(h, 2 * j - 4),
                                                       bit4));
              hi = _mm256_or_si256(
                  hi, _mm256_and_si256(2 * j + 1 <= 4 ? _mm256_slli_epi32(h, 3 - 2 * j)
                                                      : _mm256_srli_epi32(h, 2 * j - 3),
                                       bit4));
            }
            t_lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_loadu_ps(x + 64 * j + e), t_lo);
            t_hi =
                _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_loadu_ps(x + 64 * j + 32 + e), t_hi);
          }
          acc[r][0] = _mm256_fmadd_ps(_mm256_set1_ps(sc[2 * j]), t_lo, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(_mm256_set1_ps(sc[2 * j + 1]), t_hi, acc[r][1]);
          offset[r] -= mn[2 * j] * xsum[2 * j] + mn[2 * j + 1] * xsum[2 * j + 1];
        }
      }
    }
    for (int r = 0; r < R; ++r)
      store_y(a, n + r, hsum(_mm256_add_ps(acc[r][0], acc[r][1])) + offset[r]);
  }
  if constexpr (R > 1)
    if (n < n1) rows_k4<T, 1>(a, n, n1);
}

// One token over q6_k, R rows side by side: per 16-element sub-block, t = Σ (q − 32)·x with q
// built from ql's nibble and qh's two bits, then one FMA by d·sc.
template <int R>
void rows_q6_k(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = 210;
  const int64_t blocks = a.K / 256, rb = blocks * BB;
  const __m256i low4 = _mm256_set1_epi32(15), high2 = _mm256_set1_epi32(48),
                k32 = _mm256_set1_epi32(32);
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        const float d = half_at(blk + 208);
        const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
        for (int hf = 0; hf < 2; ++hf) {
          const uint8_t* ql = blk + 64 * hf;
          const uint8_t* qh = blk + 128 + 32 * hf;
          const float* x = a.x + b * 256 + 128 * hf;
          for (int g = 0; g < 2; ++g) {
            __m256 t[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                           _mm256_setzero_ps()};
            for (int e = 16 * g; e < 16 * g + 16; e += 8) {
              const __m256i l0 = lanes8(ql + e), l1 = lanes8(ql + 32 + e), h = lanes8(qh + e);
              const __m256i q[4] = {
                  _mm256_or_si256(_mm256_and_si256(l0, low4),
                                  _mm256_and_si256(_mm256_slli_epi32(h, 4), high2)),
                  _mm256_or_si256(_mm256_and_si256(l1, low4),
                                  _mm256_and_si256(_mm256_slli_epi32(h, 2), high2)),
                  _mm256_or_si256(_mm256_srli_epi32(l0, 4), _mm256_and_si256(h, high2)),
                  _mm256_or_si256(_mm256_srli_epi32(l1, 4),
                                  _mm256_and_si256(_mm256_srli_epi32(h, 2), high2))};
              for (int k = 0; k < 4; ++k)
                t[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[k], k32)),
                                       _mm256_loadu_ps(x + 32 * k + e), t[k]);
            }
            for (int k = 0; k < 4; ++k)
              acc[r][k & 1] = _mm256_fmadd_ps(_mm256_set1_ps(d * float(scales[8 * hf + 2 * k + g])),
                                              t[k], acc[r][k & 1]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) store_y(a, n + r, hsum(_mm256_add_ps(acc[r][0], acc[r][1])));
  }
  if constexpr (R > 1)
    if (n < n1) rows_q6_k<1>(a, n, n1);
}

void gemv_rows(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  if (a.M == 1) switch (a.wtype) {
      case SY_DTYPE_Q8_0: return rows_32<SY_DTYPE_Q8_0, 2>(a, n0, n1);
      case SY_DTYPE_Q4_0: return rows_32<SY_DTYPE_Q4_0, 2>(a, n0, n1);
      case SY_DTYPE_Q4_1: return rows_32<SY_DTYPE_Q4_1, 2>(a, n0, n1);
      case SY_DTYPE_Q4_K: return rows_k4<SY_DTYPE_Q4_K, 2>(a, n0, n1);
      case SY_DTYPE_Q5_K: return rows_k4<SY_DTYPE_Q5_K, 2>(a, n0, n1);
      case SY_DTYPE_Q6_K: return rows_q6_k<2>(a, n0, n1);
      default: break;
    }
  gemv_rows_any(a, n0, n1);
}

}  // namespace

const QuantTier& quant_avx2() {
  static const QuantTier tier = {"avx2", dequant_rows_any, gemv_rows};
  return tier;
}

}  // namespace sy::cpu
