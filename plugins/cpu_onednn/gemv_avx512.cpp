// AVX-512 GEMV tier (gemv.hpp): f32 FMA; bf16 with `vdpbf16ps` (pairs of bf16 products summed in
// f32) where the CPU has AVX512-BF16, else bf16 widened to f32 in registers. Only this file is
// compiled with AVX-512 flags; gemv.cpp calls it only on a CPU that has them.
#include <immintrin.h>

#include "gemv.hpp"
#include "register_tile.hpp"

namespace sy::cpu {
namespace {

using bf16_bits = uint16_t;

// 16 weights from `w` as f32 (mask selects the valid ones, the rest are 0).
inline __m512 load_w(const float* w, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, w);
}
inline __m512 load_w(const bf16_bits* w, __mmask16 mask) {
  __m256i h = _mm256_maskz_loadu_epi16(mask, w);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// One step of RN weight rows × RM activation rows: 16 elements of K (FMA on W widened to f32)
// at k, the valid ones selected by `mask`.
template <typename W, int RN, int RM>
inline void fma_step(const W* w, const float* x, int64_t K, int64_t k, __mmask16 mask,
                     __m512 (&acc)[RN][RM]) {
  __m512 xv[RM];
  SY_TILE_LOOP
  for (int m = 0; m < RM; ++m) xv[m] = _mm512_maskz_loadu_ps(mask, x + m * K + k);
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    __m512 wv = load_w(w + r * K + k, mask);
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_fmadd_ps(wv, xv[m], acc[r][m]);
  }
}

template <typename W, int RN, int RM>
void block_fma(const GemvArgs& a, int64_t n, int m0) {
  const W* w = static_cast<const W*>(a.w) + n * a.K;
  const float* x = a.xf + m0 * a.K;
  const int64_t K = a.K, full = K / 16 * 16;
  WeightSweep<RN * 16 * int(sizeof(W))> sweep(w);
  __m512 acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) SY_TILE_LOOP
  for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < full; k += 16) {
    sweep.step();
    fma_step<W, RN, RM>(w, x, K, k, __mmask16(0xffff), acc);
  }
  if (full < K) fma_step<W, RN, RM>(w, x, K, full, __mmask16((1u << (K - full)) - 1), acc);
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) SY_TILE_LOOP
  for (int m = 0; m < RM; ++m) gemv_store<W>(a, m0 + m, n + r, _mm512_reduce_add_ps(acc[r][m]));
}

// The same with vdpbf16ps: 32 elements of K per step, x and w both bf16.
template <int RN, int RM>
inline void dot_step(const bf16_bits* w, const bf16_bits* x, int64_t K, int64_t k, __mmask32 mask,
                     __m512 (&acc)[RN][RM]) {
  __m512bh xv[RM];
  SY_TILE_LOOP
  for (int m = 0; m < RM; ++m) xv[m] = (__m512bh)_mm512_maskz_loadu_epi16(mask, x + m * K + k);
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + r * K + k);
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wv, xv[m]);
  }
}

template <int RN, int RM>
void block_dot_bf16(const GemvArgs& a, int64_t n, int m0) {
  const bf16_bits* w = static_cast<const bf16_bits*>(a.w) + n * a.K;
  const bf16_bits* x = a.xb + m0 * a.K;
  const int64_t K = a.K, full = K / 32 * 32;
  WeightSweep<RN * 64> sweep(w);
  __m512 acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) SY_TILE_LOOP
  for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < full; k += 32) {
    sweep.step();
    dot_step<RN, RM>(w, x, K, k, ~__mmask32(0), acc);
  }
  if (full < K) dot_step<RN, RM>(w, x, K, full, __mmask32((1u << (K - full)) - 1), acc);
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) SY_TILE_LOOP
  for (int m = 0; m < RM; ++m)
    gemv_store<bf16_bits>(a, m0 + m, n + r, _mm512_reduce_add_ps(acc[r][m]));
}

// One kernel family (FMA on W, or the bf16 dot) over rows [n0, n1): 4-row blocks for a single
// activation row (8 rows measured slower on Zen 5: 42 vs 52 tok/s), 4 × up-to-4 otherwise.
template <template <int, int> class B>
void rows_with(const GemvArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {
    for (; n + 4 <= n1; n += 4) B<4, 1>::run(a, n, 0);
  } else {
    for (; n + 4 <= n1; n += 4)
      for (int m0 = 0; m0 < a.M; m0 += 4) switch (a.M - m0 < 4 ? a.M - m0 : 4) {
          case 4: B<4, 4>::run(a, n, m0); break;
          case 3: B<4, 3>::run(a, n, m0); break;
          case 2: B<4, 2>::run(a, n, m0); break;
          default: B<4, 1>::run(a, n, m0); break;
        }
  }
  for (; n < n1; ++n)
    for (int m0 = 0; m0 < a.M; ++m0) B<1, 1>::run(a, n, m0);
}

template <int RN, int RM>
struct FmaF32 {
  static void run(const GemvArgs& a, int64_t n, int m0) { block_fma<float, RN, RM>(a, n, m0); }
};
template <int RN, int RM>
struct FmaBf16 {
  static void run(const GemvArgs& a, int64_t n, int m0) { block_fma<bf16_bits, RN, RM>(a, n, m0); }
};
template <int RN, int RM>
struct DotBf16 {
  static void run(const GemvArgs& a, int64_t n, int m0) { block_dot_bf16<RN, RM>(a, n, m0); }
};

void rows_fma(const GemvArgs& a, int64_t n0, int64_t n1) {
  if (a.bf16)
    rows_with<FmaBf16>(a, n0, n1);
  else
    rows_with<FmaF32>(a, n0, n1);
}

void rows_dot(const GemvArgs& a, int64_t n0, int64_t n1) {
  if (a.bf16)
    rows_with<DotBf16>(a, n0, n1);
  else
    rows_with<FmaF32>(a, n0, n1);
}

const GemvTier kFma = {"avx512", rows_fma, gemv_widen_natural};
const GemvTier kDot = {"avx512_bf16", rows_dot, nullptr};  // reads bf16 x itself

}  // namespace

const GemvTier& gemv_avx512(bool bf16_dot) {
  return bf16_dot ? kDot : kFma;
}

}  // namespace sy::cpu
