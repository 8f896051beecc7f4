// AVX-512 decode attention blocks (decode_tiles.hpp): 16-wide f32 FMA, bf16 rows widened in
// registers. Only this file (and the other *_avx512 files) is compiled with AVX-512 flags;
// attention_generic.cpp decides at run time whether the CPU may call it.
#include <immintrin.h>

#include "attention/decode_tiles.hpp"

namespace sy::cpu {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int W = 16;
  static constexpr int kScoreKeys = 4;  // 4 rows × 4 keys = 16 accumulators
  static constexpr int kPvRows = 4;     // 4 rows × 4 vectors = 16 accumulators
  static constexpr int kPvKeys = 4;
  static constexpr int kPvVecs = 4;
  static constexpr int kBf16Vecs = 1;  // widened in natural order (head dims of 16·odd exist)
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void load_bf16(const uint16_t* p, V* out) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    out[0] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static __m128 sum4(V a, V b, V c, V d) {
    auto half = [](__m512 x) {
      __m256 y = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
      return _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
    };
    return _mm_hadd_ps(_mm_hadd_ps(half(a), half(b)), _mm_hadd_ps(half(c), half(d)));
  }
};

}  // namespace

// Function-local statics, built on the first call from inside the tier: a namespace-scope table
// would be built when the plugin loads, on every CPU (docs/cpu-tiers.md).
const DecodeKernels& avx512_decode_kernels(bool bf16) {
  static const DecodeKernels f32 = decode_kernels_of<Avx512>("avx512_decode_f32", "", false);
  static const DecodeKernels b16 = decode_kernels_of<Avx512>("", "avx512_decode_bf16", true);
  return bf16 ? b16 : f32;
}

}  // namespace sy::cpu
