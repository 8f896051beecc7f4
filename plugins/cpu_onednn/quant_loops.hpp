// The loops of quant_tier.hpp, written once and compiled per tier (quant_portable.cpp,
// quant_avx2.cpp, quant_avx512.cpp). Internal linkage throughout (scalar_math.hpp says why).
#pragma once

#include <cstdint>

#include "quant_blocks.hpp"
#include "quant_tier.hpp"
#include "scalar_math.hpp"

namespace sy::cpu {
namespace {

// y's element `index` (row-major [M, N]) = v, in y's dtype.
inline void store_y(const QuantGemvArgs& a, int64_t index, float v) {
  if (a.y_bf16)
    static_cast<bf16_bits*>(a.y)[index] = from_f32<bf16_bits>(v);
  else
    static_cast<float*>(a.y)[index] = v;
}

// Prefetches a thread's weight rows in address order, kQuantPrefetchBytes ahead of the furthest
// byte read so far, one line per 64 bytes (the per-row prefetch of gemv_tile misses the first
// lines of rows read side by side). Prefetches never fault, so running past the end is harmless.
inline constexpr int64_t kQuantPrefetchBytes = 6144;
struct BlockSweep {
  const uint8_t* next;
  explicit BlockSweep(const uint8_t* first) : next(first + kQuantPrefetchBytes) {}
  void reach(const uint8_t* read) {
    for (const uint8_t* want = read + kQuantPrefetchBytes; next < want; next += 64)
      __builtin_prefetch(next, 0, 3);
  }
};

template <DequantBlockFn F, int BE, int BB>
void dequant_rows_t(const uint8_t* w, int64_t K, int64_t r0, int64_t r1, float* dst) {
  const int64_t blocks = K / BE;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t b = 0; b < blocks; ++b) F(w + (r * blocks + b) * BB, dst + (r - r0) * K + b * BE);
}

// y[m][n] for rows [n0, n1), MR activation rows at once, L partial sums per row (the dot's lanes).
template <DotBlockFn F, int BE, int BB, int L, int MR>
void gemv_tile(const QuantGemvArgs& a, int m0, int64_t n0, int64_t n1) {
  const int64_t blocks = a.K / BE;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = a.w + n * blocks * BB;
    alignas(64) float acc[MR][L] = {};
    for (int64_t b = 0; b < blocks; ++b) {
      // The next rows' bytes, 8 KiB ahead in address order (gemv.hpp's WeightSweep, per block).
      for (int p = 0; p < BB; p += 64) __builtin_prefetch(row + b * BB + 8192 + p, 0, 3);
      for (int m = 0; m < MR; ++m) F(row + b * BB, a.x + (m0 + m) * a.K + b * BE, acc[m]);
    }
    for (int m = 0; m < MR; ++m) {
      for (int width = L / 2; width > 0; width /= 2)
        for (int l = 0; l < width; ++l) acc[m][l] += acc[m][l + width];
      store_y(a, (m0 + m) * a.N + n, acc[m][0]);
    }
  }
}

template <DotBlockFn F, int BE, int BB, int L>
void gemv_rows_t(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  int m0 = 0;
  for (; m0 + 2 <= a.M; m0 += 2) gemv_tile<F, BE, BB, L, 2>(a, m0, n0, n1);
  if (m0 < a.M) gemv_tile<F, BE, BB, L, 1>(a, m0, n0, n1);
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
    default: return;
  }
}

inline void gemv_rows_any(const QuantGemvArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case SY_DTYPE_Q8_0: return gemv_rows_t<dot_q8_0, 32, 34, 32>(a, n0, n1);
    case SY_DTYPE_Q4_0: return gemv_rows_t<dot_q4_0, 32, 18, 32>(a, n0, n1);
    case SY_DTYPE_Q4_1: return gemv_rows_t<dot_q4_1, 32, 20, 32>(a, n0, n1);
    case SY_DTYPE_Q4_K: return gemv_rows_t<dot_q4_k, 256, 144, 64>(a, n0, n1);
    case SY_DTYPE_Q5_K: return gemv_rows_t<dot_q5_k, 256, 176, 64>(a, n0, n1);
    case SY_DTYPE_Q6_K: return gemv_rows_t<dot_q6_k, 256, 210, 64>(a, n0, n1);
    default: return;
  }
}

inline QuantTier make_quant_tier(const char* name) {
  return QuantTier{name, dequant_rows_any, gemv_rows_any};
}

}  // namespace
}  // namespace sy::cpu
