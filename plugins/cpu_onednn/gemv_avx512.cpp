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
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < full; k += 16) {
    sweep.step();
    fma_step<W, RN, RM>(w, x, K, k, __mmask16(0xffff), acc);
  }
  if (full < K) fma_step<W, RN, RM>(w, x, K, full, __mmask16((1u << (K - full)) - 1), acc);
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) gemv_store<W>(a, m0 + m, n + r, _mm512_reduce_add_ps(acc[r][m]));
  }
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
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < full; k += 32) {
    sweep.step();
    dot_step<RN, RM>(w, x, K, k, ~__mmask32(0), acc);
  }
  if (full < K) dot_step<RN, RM>(w, x, K, full, __mmask32((1u << (K - full)) - 1), acc);
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m)
      gemv_store<bf16_bits>(a, m0 + m, n + r, _mm512_reduce_add_ps(acc[r][m]));
  }
}

// One weight row against one activation row (a decode token). Rows of 4 KiB and more, read
// several at a time, alias in the L1 and ran at 0.8-0.9 of a plain read (Llama-3.2-1B shapes,
// Zen 5); one row in address order runs at the read's speed. Two steps in flight.
template <typename W>
void row_fma(const GemvArgs& a, int64_t n) {
  const W* w = static_cast<const W*>(a.w) + n * a.K;
  const int64_t K = a.K, full = K / 16 * 16;
  WeightSweep<32 * int(sizeof(W))> sweep(w);
  __m512 even[1][1] = {{_mm512_setzero_ps()}}, odd[1][1] = {{_mm512_setzero_ps()}};
  int64_t k = 0;
  for (; k + 32 <= full; k += 32) {
    sweep.step();
    fma_step<W, 1, 1>(w, a.xf, K, k, __mmask16(0xffff), even);
    fma_step<W, 1, 1>(w, a.xf, K, k + 16, __mmask16(0xffff), odd);
  }
  if (k < full) fma_step<W, 1, 1>(w, a.xf, K, k, __mmask16(0xffff), even);
  if (full < K) fma_step<W, 1, 1>(w, a.xf, K, full, __mmask16((1u << (K - full)) - 1), odd);
  gemv_store<W>(a, 0, n, _mm512_reduce_add_ps(_mm512_add_ps(even[0][0], odd[0][0])));
}

void row_dot_bf16(const GemvArgs& a, int64_t n) {
  const bf16_bits* w = static_cast<const bf16_bits*>(a.w) + n * a.K;
  const int64_t K = a.K, full = K / 32 * 32;
  WeightSweep<128> sweep(w);
  __m512 even[1][1] = {{_mm512_setzero_ps()}}, odd[1][1] = {{_mm512_setzero_ps()}};
  int64_t k = 0;
  for (; k + 64 <= full; k += 64) {
    sweep.step();
    dot_step<1, 1>(w, a.xb, K, k, ~__mmask32(0), even);
    dot_step<1, 1>(w, a.xb, K, k + 32, ~__mmask32(0), odd);
  }
  if (k < full) dot_step<1, 1>(w, a.xb, K, k, ~__mmask32(0), even);
  if (full < K) dot_step<1, 1>(w, a.xb, K, full, __mmask32((1u << (K - full)) - 1), odd);
  gemv_store<bf16_bits>(a, 0, n, _mm512_reduce_add_ps(_mm512_add_ps(even[0][0], odd[0][0])));
}

// One kernel family (FMA on W, or the bf16 dot) over rows [n0, n1): single rows for a single
// activation row, 4 weight rows × up to 4 activation rows otherwise.
template <template <int, int> class B>
void rows_with(const GemvArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {
    for (; n < n1; ++n) B<1, 1>::row(a, n);
    return;
  }
  for (; n + 4 <= n1; n += 4)
    for (int m0 = 0; m0 < a.M; m0 += 4) switch (a.M - m0 < 4 ? a.M - m0 : 4) {
        case 4: B<4, 4>::run(a, n, m0); break;
        case 3: B<4, 3>::run(a, n, m0); break;
        case 2: B<4, 2>::run(a, n, m0); break;
        default: B<4, 1>::run(a, n, m0); break;
      }
  for (; n < n1; ++n)
    for (int m0 = 0; m0 < a.M; ++m0) B<1, 1>::run(a, n, m0);
}

template <int RN, int RM>
struct FmaF32 {
  static void run(const GemvArgs& a, int64_t n, int m0) { block_fma<float, RN, RM>(a, n, m0); }
  static void row(const GemvArgs& a, int64_t n) { row_fma<float>(a, n); }
};
template <int RN, int RM>
struct FmaBf16 {
  static void run(const GemvArgs& a, int64_t n, int m0) { block_fma<bf16_bits, RN, RM>(a, n, m0); }
  static void row(const GemvArgs& a, int64_t n) { row_fma<bf16_bits>(a, n); }
};
template <int RN, int RM>
struct DotBf16 {
  static void run(const GemvArgs& a, int64_t n, int m0) { block_dot_bf16<RN, RM>(a, n, m0); }
  static void row(const GemvArgs& a, int64_t n) { row_dot_bf16(a, n); }
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
