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

inline void store(const QuantGemvArgs& a, int64_t n, float v) {
  if (a.y_bf16)
    static_cast<bf16_bits*>(a.y)[n] = from_f32<bf16_bits>(v);
  else
    static_cast<float*>(a.y)[n] = v;
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
      store(a, n + r, _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])));
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
      store(a, n + r, _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1])));
  }
  if constexpr (R > 1)
    if (n < n1) rows_q8_0<1>(a, n, n1);
}

void gemv_rows(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  if (a.M == 1) switch (a.wtype) {
      case SY_DTYPE_Q8_0: return rows_q8_0<2>(a, n0, n1);
      case SY_DTYPE_Q4_0: return rows_q4<SY_DTYPE_Q4_0, 2>(a, n0, n1);
      case SY_DTYPE_Q4_1: return rows_q4<SY_DTYPE_Q4_1, 2>(a, n0, n1);
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
