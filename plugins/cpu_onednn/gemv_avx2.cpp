// AVX2 + FMA GEMV tier (gemv.hpp). AVX2 has no bf16 dot: 16 bf16 weights are widened to f32 in
// registers by interleaving them with zeros (one load, two unpacks), which yields elements
// {0-3, 8-11} and {4-7, 12-15}; x is widened once per call in that same lane order, so the
// products pair up without a permute. Only this file is compiled with AVX2 flags.
#include <immintrin.h>

#include "gemv.hpp"
#include "register_tile.hpp"

namespace sy::cpu {
namespace {

using bf16_bits = uint16_t;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 weights as two f32 vectors, in the lane order of gemv.hpp's widened x.
inline void load16(const float* w, __m256& lo, __m256& hi) {
  lo = _mm256_loadu_ps(w);
  hi = _mm256_loadu_ps(w + 8);
}
inline void load16(const bf16_bits* w, __m256& lo, __m256& hi) {
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  __m256i z = _mm256_setzero_si256();
  lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, v));
  hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, v));
}

// RN weight rows × RM activation rows; two accumulators per pair (lo and hi halves of each 16).
template <typename W, int RN, int RM>
void block(const GemvArgs& a, int64_t n, int m0) {
  const W* w = static_cast<const W*>(a.w) + n * a.K;
  const float* x = a.xf + m0 * a.K;
  const int64_t K = a.K, full = K / 16 * 16;
  WeightSweep<RN * 16 * int(sizeof(W))> sweep(w);
  __m256 lo_acc[RN][RM], hi_acc[RN][RM];
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) lo_acc[r][m] = hi_acc[r][m] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < full; k += 16) {
    __m256 xlo[RM], xhi[RM];
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) {
      xlo[m] = _mm256_loadu_ps(x + m * K + k);
      xhi[m] = _mm256_loadu_ps(x + m * K + k + 8);
    }
    sweep.step();
    SY_TILE_LOOP
    for (int r = 0; r < RN; ++r) {
      __m256 wlo, whi;
      load16(w + r * K + k, wlo, whi);
      SY_TILE_LOOP
      for (int m = 0; m < RM; ++m) {
        lo_acc[r][m] = _mm256_fmadd_ps(wlo, xlo[m], lo_acc[r][m]);
        hi_acc[r][m] = _mm256_fmadd_ps(whi, xhi[m], hi_acc[r][m]);
      }
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < RN; ++r) {
    SY_TILE_LOOP
    for (int m = 0; m < RM; ++m) {
      float v = hsum(_mm256_add_ps(lo_acc[r][m], hi_acc[r][m]));
      for (int64_t k = full; k < K; ++k) v += to_f32(w[r * K + k]) * x[m * K + k];
      gemv_store<W>(a, m0 + m, n + r, v);
    }
  }
}

// One weight row against one activation row (a decode token). Rows of 4 KiB and more, read
// several at a time, alias in the L1 and ran at 0.8 of a plain read (Llama-3.2-1B shapes,
// bf16, Zen 5); one row in address order runs at the read's speed. Two 16-element steps are in
// flight (four accumulators), enough to hide the FMA latency.
template <typename W>
void row_one(const GemvArgs& a, int64_t n) {
  const W* w = static_cast<const W*>(a.w) + n * a.K;
  const float* x = a.xf;
  const int64_t K = a.K, full = K / 16 * 16;
  WeightSweep<32 * int(sizeof(W))> sweep(w);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= full; k += 32) {
    sweep.step();
    SY_TILE_LOOP
    for (int u = 0; u < 2; ++u) {
      __m256 lo, hi;
      load16(w + k + 16 * u, lo, hi);
      acc[2 * u] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x + k + 16 * u), acc[2 * u]);
      acc[2 * u + 1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x + k + 16 * u + 8), acc[2 * u + 1]);
    }
  }
  if (k < full) {
    __m256 lo, hi;
    load16(w + k, lo, hi);
    acc[0] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(x + k), acc[0]);
    acc[1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(x + k + 8), acc[1]);
  }
  float v = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (k = full; k < K; ++k) v += to_f32(w[k]) * x[k];
  gemv_store<W>(a, 0, n, v);
}

template <typename W>
void rows(const GemvArgs& a, int64_t n0, int64_t n1) {
  int64_t n = n0;
  if (a.M == 1) {
    for (; n < n1; ++n) row_one<W>(a, n);
    return;
  }
  for (; n + 2 <= n1; n += 2)
    for (int m0 = 0; m0 < a.M; m0 += 3) switch (a.M - m0 < 3 ? a.M - m0 : 3) {
        case 3: block<W, 2, 3>(a, n, m0); break;
        case 2: block<W, 2, 2>(a, n, m0); break;
        default: block<W, 2, 1>(a, n, m0); break;
      }
  for (; n < n1; ++n)
    for (int m = 0; m < a.M; ++m) block<W, 1, 1>(a, n, m);
}

void rows_any(const GemvArgs& a, int64_t n0, int64_t n1) {
  if (a.bf16)
    rows<bf16_bits>(a, n0, n1);
  else
    rows<float>(a, n0, n1);
}

// x in the unpack lane order for every full 16 of each row; the tail in natural order.
void widen_unpacked(const uint16_t* x, float* xf, int64_t count, int64_t K) {
  static constexpr int kOrder[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  for (int64_t row = 0; row < count / K; ++row) {
    const uint16_t* src = x + row * K;
    float* dst = xf + row * K;
    int64_t full = K / 16 * 16;
    for (int64_t k = 0; k < full; k += 16)
      for (int i = 0; i < 16; ++i) dst[k + i] = to_f32(src[k + kOrder[i]]);
    for (int64_t k = full; k < K; ++k) dst[k] = to_f32(src[k]);
  }
}

const GemvTier kAvx2 = {"avx2", rows_any, widen_unpacked};

}  // namespace

const GemvTier& gemv_avx2() {
  return kAvx2;
}

}  // namespace sy::cpu
