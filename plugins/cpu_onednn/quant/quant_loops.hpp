// The loops of quant_tier.hpp, written once and compiled per tier (quant_portable.cpp,
// quant_avx2.cpp, quant_avx512.cpp). Internal linkage throughout (scalar_math.hpp says why).
#pragma once

#include <cstdint>

#include "quant/quant_blocks.hpp"
#include "quant/quant_tier.hpp"
#include "tier/scalar_math.hpp"

namespace sy::cpu {
namespace {

template <DequantBlockFn F, int BE, int BB>
void dequant_rows_t(const uint8_t* w, int64_t K, int64_t r0, int64_t r1, float* dst) {
  const int64_t blocks = K / BE;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t b = 0; b < blocks; ++b) F(w + (r * blocks + b) * BB, dst + (r - r0) * K + b * BE);
}

inline void dequant_rows_any(sy_dtype t, const uint8_t* w, int64_t K, int64_t r0, int64_t r1,
                             float* dst) {
  switch (t) {
    case SY_DTYPE_Q8_0: return dequant_rows_t<dequant_q8_0, 32, 34>(w, K, r0, r1, dst);
    case SY_DTYPE_Q4_0: return dequant_rows_t<dequant_q4_0, 32, 18>(w, K, r0, r1, dst);
    case SY_DTYPE_Q4_1: return dequant_rows_t<dequant_q4_1, 32, 20>(w, K, r0, r1, dst);
    case SY_DTYPE_Q4_K: return dequant_rows_t<dequant_q4_k, 256, 144>(w, K, r0, r1, dst);
    case SY_DTYPE_Q5_K: return dequant_rows_t<dequant_q5_k, 256, 176>(w, K, r0, r1, dst);
    case SY_DTYPE_Q6_K: return dequant_rows_t<dequant_q6_k, 256, 210>(w, K, r0, r1, dst);
    case SY_DTYPE_Q5_0: return dequant_rows_t<dequant_q5_0, 32, 22>(w, K, r0, r1, dst);
    case SY_DTYPE_Q5_1: return dequant_rows_t<dequant_q5_1, 32, 24>(w, K, r0, r1, dst);
    case SY_DTYPE_IQ4_NL: return dequant_rows_t<dequant_iq4_nl, 32, 18>(w, K, r0, r1, dst);
    case SY_DTYPE_IQ4_XS: return dequant_rows_t<dequant_iq4_xs, 256, 136>(w, K, r0, r1, dst);
    case SY_DTYPE_Q2_K: return dequant_rows_t<dequant_q2_k, 256, 84>(w, K, r0, r1, dst);
    case SY_DTYPE_Q3_K: return dequant_rows_t<dequant_q3_k, 256, 110>(w, K, r0, r1, dst);
    case SY_DTYPE_MXFP4: return dequant_rows_t<dequant_mxfp4, 32, 17>(w, K, r0, r1, dst);
    default: return;
  }
}

inline QuantTier make_quant_tier(const char* name) {
  return QuantTier{name, dequant_rows_any};
}

}  // namespace
}  // namespace sy::cpu
