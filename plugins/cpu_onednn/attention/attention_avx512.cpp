// AVX-512 attention blocks (f32 FMA, bf16 `vdpbf16ps`). This file alone is compiled with
// AVX-512 flags; attention_generic.cpp decides at run time whether the CPU may call it.
//
// Register tiles: scores use 6 keys × 4 vectors (64 rows) = 24 accumulators, each K element
// broadcast from memory; pv uses 6 rows × 4 vectors (64 head-dim columns), each probability
// broadcast. Both keep the FMA ports busier than the load ports.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "attention/attention_blocks.hpp"
#include "tier/exp2_avx512.hpp"
#include "tier/register_tile.hpp"

namespace sy::cpu {
namespace {

constexpr int kKeyTile = 6;
constexpr int kRowTile = 6;
constexpr int kVecTile = 4;

// cap · tanh(v / cap), with tanh(y) = sign(y)(1 − 2 / (e^{2|y|} + 1)).
inline __m512 softcap_ps(__m512 v, float cap) {
  __m512 y = _mm512_mul_ps(v, _mm512_set1_ps(1.f / cap));
  __m512 ay = _mm512_min_ps(_mm512_abs_ps(y), _mm512_set1_ps(9.f));
  __m512 e = exp2_ps(_mm512_mul_ps(ay, _mm512_set1_ps(2.f * kLog2e)));
  __m512 t =
      _mm512_sub_ps(_mm512_set1_ps(1.f),
                    _mm512_div_ps(_mm512_set1_ps(2.f), _mm512_add_ps(e, _mm512_set1_ps(1.f))));
  __m512 signed_t = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(t),
      _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(int(0x80000000u)))));
  return _mm512_mul_ps(signed_t, _mm512_set1_ps(cap));
}

void softmax(const SoftmaxBlock& b) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 mul = _mm512_set1_ps(b.softcap > 0 ? b.scale : b.scale * kLog2e);
  const __m512 log2e = _mm512_set1_ps(kLog2e);
  for (int c = 0; c < b.Mp; c += 16) {
    __m512 m_old = _mm512_load_ps(b.m + c), mx = m_old;
    __m512i lo = _mm512_load_si512(b.lo + c), hi = _mm512_load_si512(b.hi + c);
    for (int j = 0; j < b.n; ++j) {
      float* row = b.s + size_t(j) * b.Mp + c;
      __m512 v = _mm512_mul_ps(_mm512_load_ps(row), mul);
      if (b.softcap > 0) v = _mm512_mul_ps(softcap_ps(v, b.softcap), log2e);
      if (b.masked) {
        __m512i key = _mm512_set1_epi32(b.j0 + j);
        __mmask16 ok = _mm512_cmpge_epi32_mask(key, lo) & _mm512_cmple_epi32_mask(key, hi);
        v = _mm512_mask_blend_ps(ok, neg_inf, v);
      }
      _mm512_store_ps(row, v);
      mx = _mm512_max_ps(mx, v);
    }
    __m512 base =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, neg_inf, _CMP_EQ_OQ), mx, _mm512_setzero_ps());
    __m512 alpha = exp2_ps(_mm512_sub_ps(m_old, base));
    __m512 sum = _mm512_mul_ps(_mm512_load_ps(b.l + c), alpha);
    for (int j = 0; j < b.n; ++j) {
      float* row = b.s + size_t(j) * b.Mp + c;
      __m512 p = exp2_ps(_mm512_sub_ps(_mm512_load_ps(row), base));
      _mm512_store_ps(row, p);
      sum = _mm512_add_ps(sum, p);
    }
    _mm512_store_ps(b.m + c, mx);
    _mm512_store_ps(b.l + c, sum);
    _mm512_store_ps(b.alpha + c, alpha);
  }
}

// ---- f32 -------------------------------------------------------------------------------

// Q^T [D][Mp] for the broadcast kernel, then Q [Mp][D] row-major for the dot kernel.
void pack_q_f32(const void* const* rows, int M, int Mp, int D, void* out) {
  auto* qt = static_cast<float*>(out);
  float* qr = qt + size_t(Mp) * D;
  std::memset(qt, 0, 2 * sizeof(float) * size_t(Mp) * D);
  for (int r = 0; r < M; ++r) {
    const float* q = static_cast<const float*>(rows[r]);
    for (int d = 0; d < D; ++d) qt[size_t(d) * Mp + r] = q[d];
    std::memcpy(qr + size_t(r) * D, q, sizeof(float) * D);
  }
}

// [Σa, Σb, Σc, Σd] of four vectors.
inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  auto half = [](__m512 x) {
    __m256 y = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    return _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
  };
  return _mm_hadd_ps(_mm_hadd_ps(half(a), half(b)), _mm_hadd_ps(half(c), half(d)));
}

// Few query rows (decode): each key row is read once as vectors and dotted with 4 query rows
// at a time, instead of broadcasting every K element. `Chunk` loads one vector of q or k at
// element offset `e`, multiplies and accumulates.
template <int KJ, typename Fma>
inline void dot_tile(int r0, int j, int chunks, float* s, int Mp, Fma fma) {
  __m512 acc[4][KJ];
  SY_TILE_LOOP
  for (int r = 0; r < 4; ++r) {
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) acc[r][a] = _mm512_setzero_ps();
  }
  for (int c = 0; c < chunks; ++c) fma(acc, r0, j, c);
  SY_TILE_LOOP
  for (int a = 0; a < KJ; ++a)
    _mm_storeu_ps(s + size_t(j + a) * Mp + r0, sum4(acc[0][a], acc[1][a], acc[2][a], acc[3][a]));
}

template <typename Fma4, typename Fma3, typename Fma2, typename Fma1>
inline void dot_scores(int n, int M, int Mp, int chunks, float* s, Fma4 f4, Fma3 f3, Fma2 f2,
                       Fma1 f1) {
  for (int r0 = 0; r0 < M; r0 += 4) {
    int j = 0;
    for (; j + 4 <= n; j += 4) dot_tile<4>(r0, j, chunks, s, Mp, f4);
    switch (n - j) {
      case 3: dot_tile<3>(r0, j, chunks, s, Mp, f3); break;
      case 2: dot_tile<2>(r0, j, chunks, s, Mp, f2); break;
      case 1: dot_tile<1>(r0, j, chunks, s, Mp, f1); break;
      default: break;
    }
  }
  int done = (M + 3) / 4 * 4;  // padded rows: finite zeros
  for (int j = 0; j < n; ++j)
    std::memset(s + size_t(j) * Mp + done, 0, sizeof(float) * size_t(Mp - done));
}

template <int KJ>
struct DotF32 {
  const float* qr;
  const float* k;
  int64_t ks;
  int D;
  void operator()(__m512 (&acc)[4][KJ], int r0, int j, int c) const {
    __m512 q[4], kv[KJ];
    SY_TILE_LOOP
    for (int r = 0; r < 4; ++r) q[r] = _mm512_loadu_ps(qr + size_t(r0 + r) * D + 16 * c);
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) kv[a] = _mm512_loadu_ps(k + (j + a) * ks + 16 * c);
    SY_TILE_LOOP
    for (int r = 0; r < 4; ++r) {
      SY_TILE_LOOP
      for (int a = 0; a < KJ; ++a) acc[r][a] = _mm512_fmadd_ps(q[r], kv[a], acc[r][a]);
    }
  }
};

void scores_dot_f32(const float* qr, const float* k, int64_t ks, int n, int M, int Mp, int D,
                    float* s) {
  dot_scores(n, M, Mp, D / 16, s, DotF32<4>{qr, k, ks, D}, DotF32<3>{qr, k, ks, D},
             DotF32<2>{qr, k, ks, D}, DotF32<1>{qr, k, ks, D});
}

template <int KJ, int NV>
inline void scores_tile_f32(const float* qt, const float* k, int64_t ks, int Mp, int D, int c0,
                            float* s) {
  __m512 acc[KJ][NV];
  SY_TILE_LOOP
  for (int a = 0; a < KJ; ++a) {
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) acc[a][v] = _mm512_setzero_ps();
  }
  for (int d = 0; d < D; ++d) {
    __m512 q[NV];
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) q[v] = _mm512_load_ps(qt + size_t(d) * Mp + c0 + 16 * v);
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) {
      __m512 kv = _mm512_set1_ps(k[a * ks + d]);
      SY_TILE_LOOP
      for (int v = 0; v < NV; ++v) acc[a][v] = _mm512_fmadd_ps(kv, q[v], acc[a][v]);
    }
  }
  SY_TILE_LOOP
  for (int a = 0; a < KJ; ++a) {
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) _mm512_store_ps(s + size_t(a) * Mp + c0 + 16 * v, acc[a][v]);
  }
}

template <int KJ>
inline void scores_keys_f32(const float* qt, const float* k, int64_t ks, int Mp, int D, float* s) {
  int c0 = 0;
  for (; c0 + 16 * kVecTile <= Mp; c0 += 16 * kVecTile)
    scores_tile_f32<KJ, kVecTile>(qt, k, ks, Mp, D, c0, s);
  switch ((Mp - c0) / 16) {
    case 3: scores_tile_f32<KJ, 3>(qt, k, ks, Mp, D, c0, s); break;
    case 2: scores_tile_f32<KJ, 2>(qt, k, ks, Mp, D, c0, s); break;
    case 1: scores_tile_f32<KJ, 1>(qt, k, ks, Mp, D, c0, s); break;
    default: break;
  }
}

void scores_f32(const void* qt_, const void* k0_, int64_t ks, int n, int M, int Mp, int D,
                float* s) {
  const float* qt = static_cast<const float*>(qt_);
  const float* k = static_cast<const float*>(k0_);
  if (Mp == 16) return scores_dot_f32(qt + size_t(Mp) * D, k, ks, n, M, Mp, D, s);
  int j = 0;
  for (; j + kKeyTile <= n; j += kKeyTile)
    scores_keys_f32<kKeyTile>(qt, k + j * ks, ks, Mp, D, s + size_t(j) * Mp);
  const float* kt = k + j * ks;
  float* st = s + size_t(j) * Mp;
  switch (n - j) {
    case 5: scores_keys_f32<5>(qt, kt, ks, Mp, D, st); break;
    case 4: scores_keys_f32<4>(qt, kt, ks, Mp, D, st); break;
    case 3: scores_keys_f32<3>(qt, kt, ks, Mp, D, st); break;
    case 2: scores_keys_f32<2>(qt, kt, ks, Mp, D, st); break;
    case 1: scores_keys_f32<1>(qt, kt, ks, Mp, D, st); break;
    default: break;
  }
}

template <int R, int NV>
inline void pv_tile_f32(const float* p, const float* v0, int64_t vs, int n, int Mp, int D, int r0,
                        int c0, const float* alpha, float* o) {
  __m512 acc[R][NV];
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    __m512 a = _mm512_set1_ps(alpha[r0 + r]);
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v)
      acc[r][v] = _mm512_mul_ps(_mm512_loadu_ps(o + size_t(r0 + r) * D + c0 + 16 * v), a);
  }
  for (int j = 0; j < n; ++j) {
    __m512 vv[NV];
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) vv[v] = _mm512_loadu_ps(v0 + j * vs + c0 + 16 * v);
    const float* pj = p + size_t(j) * Mp + r0;
    SY_TILE_LOOP
    for (int r = 0; r < R; ++r) {
      __m512 pr = _mm512_set1_ps(pj[r]);
      SY_TILE_LOOP
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(pr, vv[v], acc[r][v]);
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(o + size_t(r0 + r) * D + c0 + 16 * v, acc[r][v]);
  }
}

template <int R>
inline void pv_rows_f32(const float* p, const float* v0, int64_t vs, int n, int Mp, int D, int r0,
                        const float* alpha, float* o) {
  int c0 = 0;
  for (; c0 + 16 * kVecTile <= D; c0 += 16 * kVecTile)
    pv_tile_f32<R, kVecTile>(p, v0, vs, n, Mp, D, r0, c0, alpha, o);
  switch ((D - c0) / 16) {
    case 3: pv_tile_f32<R, 3>(p, v0, vs, n, Mp, D, r0, c0, alpha, o); break;
    case 2: pv_tile_f32<R, 2>(p, v0, vs, n, Mp, D, r0, c0, alpha, o); break;
    case 1: pv_tile_f32<R, 1>(p, v0, vs, n, Mp, D, r0, c0, alpha, o); break;
    default: break;
  }
}

// Dispatches row tiles of R_TILE rows and the tail to a row-templated worker.
template <template <int> class Worker, typename... Args>
inline void for_row_tiles(int M, Args... args) {
  int r0 = 0;
  for (; r0 + kRowTile <= M; r0 += kRowTile) Worker<kRowTile>::run(r0, args...);
  switch (M - r0) {
    case 5: Worker<5>::run(r0, args...); break;
    case 4: Worker<4>::run(r0, args...); break;
    case 3: Worker<3>::run(r0, args...); break;
    case 2: Worker<2>::run(r0, args...); break;
    case 1: Worker<1>::run(r0, args...); break;
    default: break;
  }
}

template <int R>
struct PvF32 {
  static void run(int r0, const float* p, const float* v0, int64_t vs, int n, int Mp, int D,
                  const float* alpha, float* o) {
    pv_rows_f32<R>(p, v0, vs, n, Mp, D, r0, alpha, o);
  }
};

void pv_f32(const float* p, const void* v0, int64_t vs, int n, int M, int Mp, int D,
            const float* alpha, float* o, void*) {
  for_row_tiles<PvF32>(M, p, static_cast<const float*>(v0), vs, n, Mp, D, alpha, o);
}

size_t qt_bytes_f32(int Mp, int D) {
  return 2 * sizeof(float) * size_t(Mp) * D;
}
size_t no_scratch(int, int) {
  return 0;
}

// ---- bf16 ------------------------------------------------------------------------------
// Operands travel as 32-bit pairs of bf16 along the reduction axis: Q^T pairs over the head
// dim, P^T and V pairs over keys.

// Q^T pairs [D/2][Mp], then Q [Mp][D] row-major bf16 for the dot kernel.
void pack_q_bf16(const void* const* rows, int M, int Mp, int D, void* out) {
  auto* qt = static_cast<uint32_t*>(out);
  auto* qr = reinterpret_cast<uint16_t*>(qt + size_t(Mp) * (D / 2));
  std::memset(qt, 0, 2 * sizeof(uint32_t) * size_t(Mp) * (D / 2));
  for (int r = 0; r < M; ++r) {
    const uint32_t* q = static_cast<const uint32_t*>(rows[r]);
    for (int d2 = 0; d2 < D / 2; ++d2) qt[size_t(d2) * Mp + r] = q[d2];
    std::memcpy(qr + size_t(r) * D, q, sizeof(uint16_t) * D);
  }
}

// bf16 dot: chunks of 32 elements; a 16-element tail (D % 32 == 16) is a masked load.
template <int KJ>
struct DotBf16 {
  const uint16_t* qr;
  const uint16_t* k;
  int64_t ks;
  int D;
  void operator()(__m512 (&acc)[4][KJ], int r0, int j, int c) const {
    __mmask32 m = D - 32 * c >= 32 ? ~__mmask32(0) : __mmask32(0xffff);
    __m512bh q[4], kv[KJ];
    SY_TILE_LOOP
    for (int r = 0; r < 4; ++r)
      q[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, qr + size_t(r0 + r) * D + 32 * c);
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a)
      kv[a] = (__m512bh)_mm512_maskz_loadu_epi16(m, k + (j + a) * ks + 32 * c);
    SY_TILE_LOOP
    for (int r = 0; r < 4; ++r) {
      SY_TILE_LOOP
      for (int a = 0; a < KJ; ++a) acc[r][a] = _mm512_dpbf16_ps(acc[r][a], q[r], kv[a]);
    }
  }
};

template <int KJ, int NV>
inline void scores_tile_bf16(const uint32_t* qt, const uint16_t* k, int64_t ks, int Mp, int D,
                             int c0, float* s) {
  __m512 acc[KJ][NV];
  SY_TILE_LOOP
  for (int a = 0; a < KJ; ++a) {
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) acc[a][v] = _mm512_setzero_ps();
  }
  for (int d2 = 0; d2 < D / 2; ++d2) {
    __m512bh q[NV];
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v)
      q[v] = (__m512bh)_mm512_load_si512(qt + size_t(d2) * Mp + c0 + 16 * v);
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) {
      uint32_t pair;
      std::memcpy(&pair, k + a * ks + 2 * d2, sizeof pair);
      __m512bh kv = (__m512bh)_mm512_set1_epi32(int(pair));
      SY_TILE_LOOP
      for (int v = 0; v < NV; ++v) acc[a][v] = _mm512_dpbf16_ps(acc[a][v], kv, q[v]);
    }
  }
  SY_TILE_LOOP
  for (int a = 0; a < KJ; ++a) {
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) _mm512_store_ps(s + size_t(a) * Mp + c0 + 16 * v, acc[a][v]);
  }
}

template <int KJ>
inline void scores_keys_bf16(const uint32_t* qt, const uint16_t* k, int64_t ks, int Mp, int D,
                             float* s) {
  int c0 = 0;
  for (; c0 + 16 * kVecTile <= Mp; c0 += 16 * kVecTile)
    scores_tile_bf16<KJ, kVecTile>(qt, k, ks, Mp, D, c0, s);
  switch ((Mp - c0) / 16) {
    case 3: scores_tile_bf16<KJ, 3>(qt, k, ks, Mp, D, c0, s); break;
    case 2: scores_tile_bf16<KJ, 2>(qt, k, ks, Mp, D, c0, s); break;
    case 1: scores_tile_bf16<KJ, 1>(qt, k, ks, Mp, D, c0, s); break;
    default: break;
  }
}

void scores_bf16(const void* qt_, const void* k0_, int64_t ks, int n, int M, int Mp, int D,
                 float* s) {
  const uint32_t* qt = static_cast<const uint32_t*>(qt_);
  const uint16_t* k = static_cast<const uint16_t*>(k0_);
  if (Mp == 16) {
    auto* qr = reinterpret_cast<const uint16_t*>(qt + size_t(Mp) * (D / 2));
    int chunks = (D + 31) / 32;
    return dot_scores(n, M, Mp, chunks, s, DotBf16<4>{qr, k, ks, D}, DotBf16<3>{qr, k, ks, D},
                      DotBf16<2>{qr, k, ks, D}, DotBf16<1>{qr, k, ks, D});
  }
  int j = 0;
  for (; j + kKeyTile <= n; j += kKeyTile)
    scores_keys_bf16<kKeyTile>(qt, k + j * ks, ks, Mp, D, s + size_t(j) * Mp);
  const uint16_t* kt = k + j * ks;
  float* st = s + size_t(j) * Mp;
  switch (n - j) {
    case 5: scores_keys_bf16<5>(qt, kt, ks, Mp, D, st); break;
    case 4: scores_keys_bf16<4>(qt, kt, ks, Mp, D, st); break;
    case 3: scores_keys_bf16<3>(qt, kt, ks, Mp, D, st); break;
    case 2: scores_keys_bf16<2>(qt, kt, ks, Mp, D, st); break;
    case 1: scores_keys_bf16<1>(qt, kt, ks, Mp, D, st); break;
    default: break;
  }
}

// P^T f32 [n][Mp] -> pairs [n/2][Mp] (key 2i in the low half); an odd last key pairs with 0.
void pack_p_bf16(const float* p, int n, int Mp, uint32_t* out) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int j2 = 0; j2 < (n + 1) / 2; ++j2)
    for (int c = 0; c < Mp; c += 16) {
      __m512 even = _mm512_load_ps(p + size_t(2 * j2) * Mp + c);
      __m512 odd =
          2 * j2 + 1 < n ? _mm512_load_ps(p + size_t(2 * j2 + 1) * Mp + c) : _mm512_setzero_ps();
      __m512i both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
      _mm512_store_si512(out + size_t(j2) * Mp + c, _mm512_permutexvar_epi16(idx, both));
    }
}

// V rows (bf16, D each) -> pairs [n/2][D] of rows 2i and 2i+1 interleaved per column.
void pack_v_bf16(const uint16_t* v0, int64_t vs, int n, int D, uint32_t* out) {
  const __m512i lo_idx =
      _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                       37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi_idx =
      _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54,
                       22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  for (int j2 = 0; j2 < (n + 1) / 2; ++j2) {
    const uint16_t* a = v0 + (2 * j2) * vs;
    const uint16_t* b = 2 * j2 + 1 < n ? v0 + (2 * j2 + 1) * vs : nullptr;
    uint32_t* dst = out + size_t(j2) * D;
    for (int d = 0; d < D; d += 32) {
      __mmask32 m = D - d >= 32 ? ~__mmask32(0) : __mmask32((1u << (D - d)) - 1);
      __m512i va = _mm512_maskz_loadu_epi16(m, a + d);
      __m512i vb = b ? _mm512_maskz_loadu_epi16(m, b + d) : _mm512_setzero_si512();
      _mm512_storeu_si512(dst + d, _mm512_permutex2var_epi16(va, lo_idx, vb));
      if (D - d > 16) _mm512_storeu_si512(dst + d + 16, _mm512_permutex2var_epi16(va, hi_idx, vb));
    }
  }
}

template <int R, int NV>
inline void pv_tile_bf16(const uint32_t* p2, const uint32_t* v2, int n2, int Mp, int D, int r0,
                         int c0, const float* alpha, float* o) {
  __m512 acc[R][NV];
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    __m512 a = _mm512_set1_ps(alpha[r0 + r]);
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v)
      acc[r][v] = _mm512_mul_ps(_mm512_loadu_ps(o + size_t(r0 + r) * D + c0 + 16 * v), a);
  }
  for (int j2 = 0; j2 < n2; ++j2) {
    __m512bh vv[NV];
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v)
      vv[v] = (__m512bh)_mm512_loadu_si512(v2 + size_t(j2) * D + c0 + 16 * v);
    const uint32_t* pj = p2 + size_t(j2) * Mp + r0;
    SY_TILE_LOOP
    for (int r = 0; r < R; ++r) {
      __m512bh pr = (__m512bh)_mm512_set1_epi32(int(pj[r]));
      SY_TILE_LOOP
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], pr, vv[v]);
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    SY_TILE_LOOP
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(o + size_t(r0 + r) * D + c0 + 16 * v, acc[r][v]);
  }
}

template <int R>
struct PvBf16 {
  static void run(int r0, const uint32_t* p2, const uint32_t* v2, int n2, int Mp, int D,
                  const float* alpha, float* o) {
    int c0 = 0;
    for (; c0 + 16 * kVecTile <= D; c0 += 16 * kVecTile)
      pv_tile_bf16<R, kVecTile>(p2, v2, n2, Mp, D, r0, c0, alpha, o);
    switch ((D - c0) / 16) {
      case 3: pv_tile_bf16<R, 3>(p2, v2, n2, Mp, D, r0, c0, alpha, o); break;
      case 2: pv_tile_bf16<R, 2>(p2, v2, n2, Mp, D, r0, c0, alpha, o); break;
      case 1: pv_tile_bf16<R, 1>(p2, v2, n2, Mp, D, r0, c0, alpha, o); break;
      default: break;
    }
  }
};

size_t p2_words(int Mp) {
  return size_t(kVectorBlockKeys / 2) * Mp;
}

void pv_bf16(const float* p, const void* v0, int64_t vs, int n, int M, int Mp, int D,
             const float* alpha, float* o, void* scratch) {
  auto* p2 = static_cast<uint32_t*>(scratch);
  uint32_t* v2 = p2 + p2_words(Mp);
  pack_p_bf16(p, n, Mp, p2);
  pack_v_bf16(static_cast<const uint16_t*>(v0), vs, n, D, v2);
  for_row_tiles<PvBf16>(M, static_cast<const uint32_t*>(p2), static_cast<const uint32_t*>(v2),
                        (n + 1) / 2, Mp, D, alpha, o);
}

size_t qt_bytes_bf16(int Mp, int D) {
  return 2 * sizeof(uint32_t) * size_t(Mp) * (D / 2);
}
size_t pv_scratch_bf16(int Mp, int D) {
  return sizeof(uint32_t) * (p2_words(Mp) + size_t(kVectorBlockKeys / 2) * D);
}

const BlockKernels kF32 = {"avx512_f32", kVectorBlockKeys, true,         pack_q_f32, scores_f32,
                           softmax,      pv_f32,           qt_bytes_f32, no_scratch};
const BlockKernels kBf16 = {"avx512_bf16", kVectorBlockKeys, true,
                            pack_q_bf16,   scores_bf16,      softmax,
                            pv_bf16,       qt_bytes_bf16,    pv_scratch_bf16};

}  // namespace

// Called only after attention_generic.cpp checked the CPU.
const BlockKernels& avx512_block_kernels(bool bf16) {
  return bf16 ? kBf16 : kF32;
}

void avx512_pack_p_bf16(const float* p, int n, int Mp, uint32_t* out) {
  pack_p_bf16(p, n, Mp, out);
}
void avx512_pack_v_bf16(const uint16_t* v0, int64_t vs, int n, int D, uint32_t* out) {
  pack_v_bf16(v0, vs, n, D, out);
}

}  // namespace sy::cpu
