// The block-quantized loops (quant_loops.hpp) compiled for the avx512 tier, and hand-written
// one-token dot products for the 32-element types (q8_0, q4_0, q4_1), which the compiler's
// vectorisation of quant_loops.hpp runs far below the memory bandwidth. Only this file's flags
// allow its instructions; quant_tier() calls it only on a CPU that has them.
#include <immintrin.h>

#include "quant_loops.hpp"

namespace sy::cpu {
namespace {

// The 32 integers of a block as two vectors of f32: q8_0's int8, or q4's nibbles (elements 0-15
// in the low ones, 16-31 in the high ones), without q4_0's −8 (applied through x's sums).
template <sy_dtype T>
inline void block_q(const uint8_t* blk, __m512& q0, __m512& q1) {
  if constexpr (T == SY_DTYPE_Q8_0) {
    q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(blk + 2))));
    q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(blk + 18))));
  } else {
    const __m128i v = _mm_loadu_si128((const __m128i*)(blk + (T == SY_DTYPE_Q4_0 ? 2 : 4)));
    const __m128i low = _mm_set1_epi8(0x0f);
    q0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(v, low)));
    q1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), low)));
  }
}

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// One token (M = 1): y[n] = Σ_b d_b·Σ_i q_i·x_i (+ the offsets: q4_0 −8·d_b·Σx, q4_1 m_b·Σx),
// two blocks in flight on four accumulators.
template <sy_dtype T>
void row_dot_32(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  constexpr int BB = T == SY_DTYPE_Q8_0 ? 34 : T == SY_DTYPE_Q4_0 ? 18 : 20;
  const int64_t blocks = a.K / 32;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = a.w + n * blocks * BB;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    float offset[4] = {};  // four chains: one would cost an add's latency per block
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * BB;
      _mm_prefetch(reinterpret_cast<const char*>(blk) + 8192, _MM_HINT_T0);
      __m512 q0, q1;
      block_q<T>(blk, q0, q1);
      const float d = half_at(blk);
      const __m512 dv = _mm512_set1_ps(d);
      const float* x = a.x + b * 32;
      const int s = int(b & 1) * 2;
      acc[s] = _mm512_fmadd_ps(_mm512_mul_ps(q0, dv), _mm512_loadu_ps(x), acc[s]);
      acc[s + 1] = _mm512_fmadd_ps(_mm512_mul_ps(q1, dv), _mm512_loadu_ps(x + 16), acc[s + 1]);
      if constexpr (T == SY_DTYPE_Q4_0) offset[b & 3] -= 8.f * d * a.xsum[b];
      if constexpr (T == SY_DTYPE_Q4_1) offset[b & 3] += half_at(blk + 2) * a.xsum[b];
    }
    const float v = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                                       _mm512_add_ps(acc[2], acc[3]))) +
                    (offset[0] + offset[1]) + (offset[2] + offset[3]);
    if (a.y_bf16)
      static_cast<bf16_bits*>(a.y)[n] = from_f32<bf16_bits>(v);
    else
      static_cast<float*>(a.y)[n] = v;
  }
}

void gemv_rows(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  if (a.M == 1) switch (a.wtype) {
      case SY_DTYPE_Q8_0: return row_dot_32<SY_DTYPE_Q8_0>(a, n0, n1);
      case SY_DTYPE_Q4_0: return row_dot_32<SY_DTYPE_Q4_0>(a, n0, n1);
      case SY_DTYPE_Q4_1: return row_dot_32<SY_DTYPE_Q4_1>(a, n0, n1);
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
