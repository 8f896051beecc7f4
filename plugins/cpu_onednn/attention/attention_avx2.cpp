// AVX2 + FMA attention blocks (attention_blocks.hpp), for CPUs without AVX-512 and for bf16 on
// AVX-512 CPUs without AVX512-BF16. AVX2 has no bf16 dot: bf16 K and V blocks are widened to
// f32 once per block into scratch (L1-resident, 48 keys × D), then everything is f32 FMA.
// Only this file is compiled with AVX2 flags; cpu_tier.cpp decides whether the CPU may call it.
//
// Register tiles (16 ymm): scores use 6 keys × 2 vectors (16 rows) = 12 accumulators, each K
// element broadcast; few-row scores (decode) use 4 rows × 2 keys of row dots; pv uses 6 rows ×
// 2 vectors (16 head-dim columns) = 12 accumulators, each probability broadcast.
#include <immintrin.h>

#include <cstring>

#include "attention/attention_blocks.hpp"
#include "tier/register_tile.hpp"
#include "tier/scalar_math.hpp"

namespace sy::cpu {
namespace {

constexpr int kKeyTile = 6;
constexpr int kPvRows = 6;  // × 2 vectors: 12 accumulators, enough to hide the FMA latency

// 2^x for x in base-2 log domain; below -126 (including -inf) exactly 0.
inline __m256 exp2_ps(__m256 x) {
  const __m256 lowest = _mm256_set1_ps(-126.f);
  __m256 under = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
  __m256 c = _mm256_max_ps(x, lowest);
  __m256 xi = _mm256_round_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_sub_ps(c, xi);
  __m256 p = _mm256_set1_ps(1.5403530393381608e-4f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618129107628477e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550410866482158e-2f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402265069591007e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931471805599453e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(xi), _mm256_set1_epi32(127)), 23);
  __m256 r = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, r);
}

// cap · tanh(v / cap), with tanh(y) = sign(y)(1 − 2 / (e^{2|y|} + 1)).
inline __m256 softcap_ps(__m256 v, float cap) {
  const __m256 sign_bit = _mm256_set1_ps(-0.f);
  __m256 y = _mm256_mul_ps(v, _mm256_set1_ps(1.f / cap));
  __m256 ay = _mm256_min_ps(_mm256_andnot_ps(sign_bit, y), _mm256_set1_ps(9.f));
  __m256 e = exp2_ps(_mm256_mul_ps(ay, _mm256_set1_ps(2.f * kLog2e)));
  __m256 t =
      _mm256_sub_ps(_mm256_set1_ps(1.f),
                    _mm256_div_ps(_mm256_set1_ps(2.f), _mm256_add_ps(e, _mm256_set1_ps(1.f))));
  return _mm256_mul_ps(_mm256_or_ps(t, _mm256_and_ps(y, sign_bit)), _mm256_set1_ps(cap));
}

void softmax(const SoftmaxBlock& b) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  const __m256 mul = _mm256_set1_ps(b.softcap > 0 ? b.scale : b.scale * kLog2e);
  const __m256 log2e = _mm256_set1_ps(kLog2e);
  for (int c = 0; c < b.Mp; c += 8) {
    __m256 m_old = _mm256_load_ps(b.m + c), mx = m_old;
    __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.lo + c));
    __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.hi + c));
    for (int j = 0; j < b.n; ++j) {
      float* row = b.s + size_t(j) * b.Mp + c;
      __m256 v = _mm256_mul_ps(_mm256_load_ps(row), mul);
      if (b.softcap > 0) v = _mm256_mul_ps(softcap_ps(v, b.softcap), log2e);
      if (b.masked) {
        __m256i key = _mm256_set1_epi32(b.j0 + j);
        __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(lo, key), _mm256_cmpgt_epi32(key, hi));
        v = _mm256_blendv_ps(v, neg_inf, _mm256_castsi256_ps(out));
      }
      _mm256_store_ps(row, v);
      mx = _mm256_max_ps(mx, v);
    }
    __m256 base = _mm256_andnot_ps(_mm256_cmp_ps(mx, neg_inf, _CMP_EQ_OQ), mx);
    __m256 alpha = exp2_ps(_mm256_sub_ps(m_old, base));
    __m256 sum = _mm256_mul_ps(_mm256_load_ps(b.l + c), alpha);
    for (int j = 0; j < b.n; ++j) {
      float* row = b.s + size_t(j) * b.Mp + c;
      __m256 p = exp2_ps(_mm256_sub_ps(_mm256_load_ps(row), base));
      _mm256_store_ps(row, p);
      sum = _mm256_add_ps(sum, p);
    }
    _mm256_store_ps(b.m + c, mx);
    _mm256_store_ps(b.l + c, sum);
    _mm256_store_ps(b.alpha + c, alpha);
  }
}

// qt holds Q^T [D][Mp] (broadcast kernel), Q [Mp][D] (row dots) and a K block widened to f32
// [kVectorBlockKeys][D] (bf16 only), all f32.
struct QtParts {
  float* qt;
  float* qr;
  float* kf;
};
inline QtParts parts(const void* qt, int Mp, int D) {
  float* base = static_cast<float*>(const_cast<void*>(qt));
  return {base, base + size_t(Mp) * D, base + 2 * size_t(Mp) * D};
}

template <typename T>
void pack_q(const void* const* rows, int M, int Mp, int D, void* out) {
  QtParts p = parts(out, Mp, D);
  std::memset(p.qt, 0, 2 * sizeof(float) * size_t(Mp) * D);
  for (int r = 0; r < M; ++r) {
    const T* q = static_cast<const T*>(rows[r]);
    for (int d = 0; d < D; ++d) {
      float x;
      if constexpr (sizeof(T) == 4)
        x = q[d];
      else
        x = to_f32(q[d]);
      p.qt[size_t(d) * Mp + r] = x;
      p.qr[size_t(r) * D + d] = x;
    }
  }
}

size_t qt_bytes(int Mp, int D) {
  return sizeof(float) * (2 * size_t(Mp) * D + size_t(kVectorBlockKeys) * D);
}

// n rows of `src` (stride elements apart) as contiguous f32 rows of D.
void widen_rows(const uint16_t* src, int64_t stride, int n, int D, float* dst) {
  for (int j = 0; j < n; ++j) {
    const uint16_t* s = src + j * stride;
    float* d = dst + size_t(j) * D;
    for (int e = 0; e < D; e += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + e));
      _mm256_storeu_ps(d + e, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
  }
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Few rows: S[j][r] = q_r · k_j as row dots, 4 rows × KJ keys per tile.
template <int KJ>
inline void dot_tile(const float* qr, const float* k, int64_t ks, int D, int r0, int j, int Mp,
                     float* s) {
  __m256 acc[4][KJ];
  SY_TILE_LOOP
  for (int r = 0; r < 4; ++r) {
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) acc[r][a] = _mm256_setzero_ps();
  }
  for (int e = 0; e < D; e += 8) {
    __m256 kv[KJ];
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) kv[a] = _mm256_loadu_ps(k + (j + a) * ks + e);
    SY_TILE_LOOP
    for (int r = 0; r < 4; ++r) {
      __m256 q = _mm256_loadu_ps(qr + size_t(r0 + r) * D + e);
      SY_TILE_LOOP
      for (int a = 0; a < KJ; ++a) acc[r][a] = _mm256_fmadd_ps(q, kv[a], acc[r][a]);
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < 4; ++r) {
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) s[size_t(j + a) * Mp + r0 + r] = hsum(acc[r][a]);
  }
}

void scores_dot(const float* qr, const float* k, int64_t ks, int n, int M, int Mp, int D,
                float* s) {
  for (int r0 = 0; r0 < M; r0 += 4) {
    int j = 0;
    for (; j + 2 <= n; j += 2) dot_tile<2>(qr, k, ks, D, r0, j, Mp, s);
    if (j < n) dot_tile<1>(qr, k, ks, D, r0, j, Mp, s);
  }
  int done = (M + 3) / 4 * 4;  // padded rows: finite zeros
  for (int j = 0; j < n; ++j)
    std::memset(s + size_t(j) * Mp + done, 0, sizeof(float) * size_t(Mp - done));
}

// Many rows: KJ keys × 16 rows per tile, each K element broadcast against Q^T.
template <int KJ>
inline void scores_keys(const float* qt, const float* k, int64_t ks, int Mp, int D, float* s) {
  for (int c0 = 0; c0 < Mp; c0 += 16) {
    __m256 acc[KJ][2];
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int d = 0; d < D; ++d) {
      __m256 q0 = _mm256_load_ps(qt + size_t(d) * Mp + c0);
      __m256 q1 = _mm256_load_ps(qt + size_t(d) * Mp + c0 + 8);
      SY_TILE_LOOP
      for (int a = 0; a < KJ; ++a) {
        __m256 kv = _mm256_broadcast_ss(k + a * ks + d);
        acc[a][0] = _mm256_fmadd_ps(kv, q0, acc[a][0]);
        acc[a][1] = _mm256_fmadd_ps(kv, q1, acc[a][1]);
      }
    }
    SY_TILE_LOOP
    for (int a = 0; a < KJ; ++a) {
      _mm256_store_ps(s + size_t(a) * Mp + c0, acc[a][0]);
      _mm256_store_ps(s + size_t(a) * Mp + c0 + 8, acc[a][1]);
    }
  }
}

void scores_f32(const void* qt_, const float* k, int64_t ks, int n, int M, int Mp, int D,
                float* s) {
  QtParts p = parts(qt_, Mp, D);
  if (Mp == 16) return scores_dot(p.qr, k, ks, n, M, Mp, D, s);
  int j = 0;
  for (; j + kKeyTile <= n; j += kKeyTile)
    scores_keys<kKeyTile>(p.qt, k + j * ks, ks, Mp, D, s + size_t(j) * Mp);
  const float* kt = k + j * ks;
  float* st = s + size_t(j) * Mp;
  switch (n - j) {
    case 5: scores_keys<5>(p.qt, kt, ks, Mp, D, st); break;
    case 4: scores_keys<4>(p.qt, kt, ks, Mp, D, st); break;
    case 3: scores_keys<3>(p.qt, kt, ks, Mp, D, st); break;
    case 2: scores_keys<2>(p.qt, kt, ks, Mp, D, st); break;
    case 1: scores_keys<1>(p.qt, kt, ks, Mp, D, st); break;
    default: break;
  }
}

template <typename T>
void scores(const void* qt, const void* k0, int64_t ks, int n, int M, int Mp, int D, float* s) {
  if constexpr (sizeof(T) == 4) {
    scores_f32(qt, static_cast<const float*>(k0), ks, n, M, Mp, D, s);
  } else {
    float* kf = parts(qt, Mp, D).kf;
    widen_rows(static_cast<const uint16_t*>(k0), ks, n, D, kf);
    scores_f32(qt, kf, D, n, M, Mp, D, s);
  }
}

// O[r] = O[r]·alpha[r] + Σ_j P[j][r]·v_j for R rows and NV vectors of columns from c0.
template <int R, int NV>
inline void pv_tile(const float* p, const float* v, int64_t vs, int n, int Mp, int D, int r0,
                    int c0, const float* alpha, float* o) {
  __m256 acc[R][NV];
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    __m256 a = _mm256_set1_ps(alpha[r0 + r]);
    SY_TILE_LOOP
    for (int x = 0; x < NV; ++x)
      acc[r][x] = _mm256_mul_ps(_mm256_loadu_ps(o + size_t(r0 + r) * D + c0 + 8 * x), a);
  }
  for (int j = 0; j < n; ++j) {
    __m256 vv[NV];
    SY_TILE_LOOP
    for (int x = 0; x < NV; ++x) vv[x] = _mm256_loadu_ps(v + j * vs + c0 + 8 * x);
    const float* pj = p + size_t(j) * Mp + r0;
    SY_TILE_LOOP
    for (int r = 0; r < R; ++r) {
      __m256 pr = _mm256_broadcast_ss(pj + r);
      SY_TILE_LOOP
      for (int x = 0; x < NV; ++x) acc[r][x] = _mm256_fmadd_ps(pr, vv[x], acc[r][x]);
    }
  }
  SY_TILE_LOOP
  for (int r = 0; r < R; ++r) {
    SY_TILE_LOOP
    for (int x = 0; x < NV; ++x) _mm256_storeu_ps(o + size_t(r0 + r) * D + c0 + 8 * x, acc[r][x]);
  }
}

template <int R>
inline void pv_rows(const float* p, const float* v, int64_t vs, int n, int Mp, int D, int r0,
                    const float* alpha, float* o) {
  for (int c0 = 0; c0 < D; c0 += 16) pv_tile<R, 2>(p, v, vs, n, Mp, D, r0, c0, alpha, o);
}

void pv_f32(const float* p, const float* v, int64_t vs, int n, int M, int Mp, int D,
            const float* alpha, float* o) {
  int r0 = 0;
  for (; r0 + kPvRows <= M; r0 += kPvRows) pv_rows<kPvRows>(p, v, vs, n, Mp, D, r0, alpha, o);
  switch (M - r0) {
    case 5: pv_rows<5>(p, v, vs, n, Mp, D, r0, alpha, o); break;
    case 4: pv_rows<4>(p, v, vs, n, Mp, D, r0, alpha, o); break;
    case 3: pv_rows<3>(p, v, vs, n, Mp, D, r0, alpha, o); break;
    case 2: pv_rows<2>(p, v, vs, n, Mp, D, r0, alpha, o); break;
    case 1: pv_rows<1>(p, v, vs, n, Mp, D, r0, alpha, o); break;
    default: break;
  }
}

template <typename T>
void pv(const float* p, const void* v0, int64_t vs, int n, int M, int Mp, int D, const float* alpha,
        float* o, void* scratch) {
  if constexpr (sizeof(T) == 4) {
    pv_f32(p, static_cast<const float*>(v0), vs, n, M, Mp, D, alpha, o);
  } else {
    float* vf = static_cast<float*>(scratch);
    widen_rows(static_cast<const uint16_t*>(v0), vs, n, D, vf);
    pv_f32(p, vf, D, n, M, Mp, D, alpha, o);
  }
}

size_t no_scratch(int, int) {
  return 0;
}
size_t v_block_bytes(int, int D) {
  return sizeof(float) * size_t(kVectorBlockKeys) * D;
}

const BlockKernels kF32 = {"avx2_f32", kVectorBlockKeys, true,     pack_q<float>, scores<float>,
                           softmax,    pv<float>,        qt_bytes, no_scratch};
const BlockKernels kBf16 = {"avx2_bf16",      kVectorBlockKeys, true,
                            pack_q<uint16_t>, scores<uint16_t>, softmax,
                            pv<uint16_t>,     qt_bytes,         v_block_bytes};

}  // namespace

const BlockKernels& avx2_block_kernels(bool bf16) {
  return bf16 ? kBf16 : kF32;
}

}  // namespace sy::cpu
