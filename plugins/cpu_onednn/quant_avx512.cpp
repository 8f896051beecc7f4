// The block-quantized loops (quant_loops.hpp) compiled for the avx512 tier, and hand-written
// one-token dot products for the 32-element types (q8_0, q4_0, q4_1), which the compiler's
// vectorisation of quant_loops.hpp runs far below the memory bandwidth (measured in a harness
// on Zen 5, one thread, q4_1 576x1536: the generic loop ~3, a cvt-and-scale kernel ~9, the
// table kernel below ~22 GB/s). Only this file's flags
// allow its instructions; quant_tier() calls it only on a CPU that has them.
#include <immintrin.h>

#include "quant_loops.hpp"

namespace sy::cpu {
namespace {

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// One token (M = 1) over q4_0 / q4_1, R rows side by side (sharing x's loads). Each block's 16
// possible values d·i + m (q4_0: m = −8·d) are made once, exactly as GGUF's f32 dequantization
// rounds them (one FMA), into a table that vpermps indexes by nibble: vpermps reads only an
// index's low 4 bits, so the low nibbles need no mask and the high ones one shift. Per 32
// weights: one widening load, one shift, two permutes, two FMAs, and the table.
template <sy_dtype T, int R>
void rows_q4(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = T == SY_DTYPE_Q4_0 ? 18 : 20, QS = T == SY_DTYPE_Q4_0 ? 2 : 4;
  const int64_t blocks = a.K / 32, rb = blocks * BB;
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m512 x0 = _mm512_loadu_ps(a.x + b * 32), x1 = _mm512_loadu_ps(a.x + b * 32 + 16);
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        __m512 d, m;
        if constexpr (T == SY_DTYPE_Q4_1) {
          int32_t dm_bits;
          std::memcpy(&dm_bits, blk, 4);
          const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm_bits));
          d = _mm512_broadcastss_ps(dm);
          m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));
        } else {
          d = _mm512_set1_ps(half_at(blk));
          m = _mm512_mul_ps(d, _mm512_set1_ps(-8.f));
        }
        const __m512 table = _mm512_fmadd_ps(iota, d, m);
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(blk + QS)));
        acc[r][0] = _mm512_fmadd_ps(_mm512_permutexvar_ps(q, table), x0, acc[r][0]);
        acc[r][1] =
            _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table), x1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r)
      store_y(a, n + r, _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])));
  }
  if constexpr (R > 1)
    if (n < n1) rows_q4<T, 1>(a, n, n1);
}

// One token over q8_0, R rows side by side: t = Σ q·x over the block (two FMAs), then one FMA
// by the block's scale, alternating two accumulators per row.
template <int R>
void rows_q8_0(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = 34;
  const int64_t blocks = a.K / 32, rb = blocks * BB;
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const __m512 x0 = _mm512_loadu_ps(a.x + b * 32), x1 = _mm512_loadu_ps(a.x + b * 32 + 16);
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        const __m512 q0 =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(blk + 2))));
        const __m512 q1 =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(blk + 18))));
        const __m512 t = _mm512_fmadd_ps(q1, x1, _mm512_mul_ps(q0, x0));
        acc[r][b & 1] = _mm512_fmadd_ps(_mm512_set1_ps(half_at(blk)), t, acc[r][b & 1]);
      }
    }
    for (int r = 0; r < R; ++r)
      store_y(a, n + r, _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])));
  }
  if constexpr (R > 1)
    if (n < n1) rows_q8_0<1>(a, n, n1);
}

// The eight 6-bit scales and mins of a q4_k / q5_k block (ggml's get_scale_min_k4 for all j at
// once, on 32-bit words) as f32 lanes 0-7 = d·sc and 8-15 = −dmin·m.
inline __m512 k4_scales(const uint8_t* blk) {
  uint32_t a, b, c;
  std::memcpy(&a, blk + 4, 4);
  std::memcpy(&b, blk + 8, 4);
  std::memcpy(&c, blk + 12, 4);
  const uint32_t sc_lo = a & 0x3f3f3f3f, m_lo = b & 0x3f3f3f3f;
  const uint32_t sc_hi = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
  const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
  const __m128i v = _mm_set_epi32(int(m_hi), int(m_lo), int(sc_hi), int(sc_lo));
  const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
  const __m512 dm =
      _mm512_insertf32x8(_mm512_set1_ps(half_at(blk)), _mm256_set1_ps(-half_at(blk + 2)), 1);
  return _mm512_mul_ps(f, dm);
}

inline __m512 lane(const __m512 v, int i) {
  return _mm512_permutexvar_ps(_mm512_set1_epi32(i), v);
}

// One token over q4_k / q5_k (256-element blocks of eight 32-element sub-blocks), R rows side by
// side: per sub-block a table of its 16 (q4_k) or 32 (q5_k, vpermt2ps over two tables) values
// d·sc·q − dmin·m, indexed by the element's bits as in rows_q4.
template <sy_dtype T, int R>
void rows_k4(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = T == SY_DTYPE_Q4_K ? 144 : 176;
  const int64_t blocks = a.K / 256, rb = blocks * BB;
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 iota16 = _mm512_add_ps(iota, _mm512_set1_ps(16.f));
  const __m512i low4 = _mm512_set1_epi32(15), bit4 = _mm512_set1_epi32(16);
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      const float* x = a.x + b * 256;
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        const __m512 sm = k4_scales(blk);
        const uint8_t* qs = blk + (T == SY_DTYPE_Q4_K ? 16 : 48);
        __m512i h[2];
        if constexpr (T == SY_DTYPE_Q5_K) {
          h[0] = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(blk + 16)));
          h[1] = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(blk + 32)));
        }
        for (int j = 0; j < 4; ++j) {  // sub-blocks 2j (low nibbles) and 2j + 1 (high)
          const __m512 s_lo = lane(sm, 2 * j), s_hi = lane(sm, 2 * j + 1);
          const __m512 m_lo = lane(sm, 8 + 2 * j), m_hi = lane(sm, 9 + 2 * j);
          const __m512 t_lo = _mm512_fmadd_ps(iota, s_lo, m_lo);
          const __m512 t_hi = _mm512_fmadd_ps(iota, s_hi, m_hi);
          for (int half = 0; half < 2; ++half) {
            const __m512i z =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(qs + 32 * j + 16 * half)));
            const __m512 x_lo = _mm512_loadu_ps(x + 64 * j + 16 * half);
            const __m512 x_hi = _mm512_loadu_ps(x + 64 * j + 32 + 16 * half);
            __m512 w_lo, w_hi;
            if constexpr (T == SY_DTYPE_Q4_K) {
              w_lo = _mm512_permutexvar_ps(z, t_lo);
              w_hi = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), t_hi);
            } else {  // the fifth bit: qh bit 2j (low) and 2j + 1 (high), moved to bit 4
              const __m512i hb = h[half];
              const __m512i b_lo =
                  2 * j <= 4 ? _mm512_slli_epi32(hb, 4 - 2 * j) : _mm512_srli_epi32(hb, 2 * j - 4);
              const __m512i b_hi = 2 * j + 1 <= 4 ? _mm512_slli_epi32(hb, 3 - 2 * j)
                                                  : _mm512_srli_epi32(hb, 2 * j - 3);
              // low: (z & 15) | (b_lo & 16); high: (z >> 4) | (b_hi & 16)
              const __m512i i_lo =
                  _mm512_ternarylogic_epi32(z, _mm512_and_si512(b_lo, bit4), low4, 0xE4);
              const __m512i i_hi =
                  _mm512_ternarylogic_epi32(_mm512_srli_epi32(z, 4), b_hi, bit4, 0xF8);
              w_lo = _mm512_permutex2var_ps(t_lo, i_lo, _mm512_fmadd_ps(iota16, s_lo, m_lo));
              w_hi = _mm512_permutex2var_ps(t_hi, i_hi, _mm512_fmadd_ps(iota16, s_hi, m_hi));
            }
            acc[r][0] = _mm512_fmadd_ps(w_lo, x_lo, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w_hi, x_hi, acc[r][1]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      store_y(a, n + r, _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])));
  }
  if constexpr (R > 1)
    if (n < n1) rows_k4<T, 1>(a, n, n1);
}

// One token over q6_k (sixteen 16-element sub-blocks per block, x = d·sc·(q − 32), q = 4 bits of
// ql and 2 of qh), R rows side by side: per sub-block, q − 32 as f32 times its scale d·sc, one FMA.
template <int R>
void rows_q6_k(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = 210;
  const int64_t blocks = a.K / 256, rb = blocks * BB;
  const __m512i low4 = _mm512_set1_epi32(15), six = _mm512_set1_epi32(63),
                k32 = _mm512_set1_epi32(32);
  BlockSweep sweep(a.w + n0 * rb);
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      sweep.reach(a.w + (n + R - 1) * rb + b * BB);
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = a.w + (n + r) * rb + b * BB;
        const __m512 sc = _mm512_mul_ps(
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(blk + 192)))),
            _mm512_set1_ps(half_at(blk + 208)));
        for (int hf = 0; hf < 2; ++hf) {  // 128 elements: ql[64], qh[32], scales 8·hf…
          const uint8_t* ql = blk + 64 * hf;
          const uint8_t* qh = blk + 128 + 32 * hf;
          const float* x = a.x + b * 256 + 128 * hf;
          for (int g = 0; g < 2; ++g) {  // l = 16·g … 16·g + 15
            const __m512i l0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(ql + 16 * g)));
            const __m512i l1 =
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(ql + 32 + 16 * g)));
            const __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(qh + 16 * g)));
            // q_k = (nibble) | (qh bits 2k..2k+1 << 4), k = 0..3; then − 32.
            const __m512i q[4] = {
                _mm512_ternarylogic_epi32(l0, _mm512_slli_epi32(h, 4), low4, 0xE4),
                _mm512_ternarylogic_epi32(l1, _mm512_slli_epi32(h, 2), low4, 0xE4),
                _mm512_ternarylogic_epi32(_mm512_srli_epi32(l0, 4), h, low4, 0xE4),
                _mm512_ternarylogic_epi32(_mm512_srli_epi32(l1, 4), _mm512_srli_epi32(h, 2), low4,
                                          0xE4)};
            for (int k = 0; k < 4; ++k) {
              const __m512 w =
                  _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(q[k], six), k32));
              const __m512 s = lane(sc, 8 * hf + 2 * k + g);
              acc[r][k & 1] = _mm512_fmadd_ps(_mm512_mul_ps(w, s),
                                              _mm512_loadu_ps(x + 32 * k + 16 * g), acc[r][k & 1]);
            }
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      store_y(a, n + r, _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])));
  }
  if constexpr (R > 1)
    if (n < n1) rows_q6_k<1>(a, n, n1);
}

void gemv_rows(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  if (a.M == 1) switch (a.wtype) {
      case SY_DTYPE_Q8_0: return rows_q8_0<2>(a, n0, n1);
      case SY_DTYPE_Q4_0: return rows_q4<SY_DTYPE_Q4_0, 2>(a, n0, n1);
      case SY_DTYPE_Q4_1: return rows_q4<SY_DTYPE_Q4_1, 2>(a, n0, n1);
      case SY_DTYPE_Q4_K: return rows_k4<SY_DTYPE_Q4_K, 2>(a, n0, n1);
      case SY_DTYPE_Q5_K: return rows_k4<SY_DTYPE_Q5_K, 2>(a, n0, n1);
      case SY_DTYPE_Q6_K: return rows_q6_k<2>(a, n0, n1);
      default: break;
    }
  gemv_rows_any(a, n0, n1);
}

}  // namespace

const QuantTier& quant_avx512() {
  static const QuantTier tier = {"avx512", dequant_rows_any, gemv_rows};
  return tier;
}

}  // namespace sy::cpu
