// AVX2 + FMA decode attention blocks (decode_tiles.hpp): 8-wide f32 FMA, bf16 rows widened in
// registers (AVX2 has no bf16 dot). Only this file (and the other *_avx2 files) is compiled
// with AVX2 flags; attention_generic.cpp decides at run time whether the CPU may call it.
#include <immintrin.h>

#include "attention/decode_tiles.hpp"

namespace sy::cpu {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int W = 8;
  static constexpr int kScoreKeys = 2;  // 4 rows × 2 keys = 8 accumulators of 16 registers
  static constexpr int kPvRows = 4;     // 4 rows × 2 vectors = 8 accumulators
  static constexpr int kPvKeys = 16;
  static constexpr int kPvVecs = 2;
  static constexpr int kBf16Vecs = 2;  // 16 bf16: evens (shift) and odds (mask), no shuffle
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void load_bf16(const uint16_t* p, V* out) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    out[1] = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int(0xffff0000u))));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static __m128 sum4(V a, V b, V c, V d) {
    __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd);  // per 128-bit half: {a, b, c, d} partial sums
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
  }
};

}  // namespace

// Function-local statics, built on the first call from inside the tier: a namespace-scope table
// would be built when the plugin loads, on every CPU (docs/cpu-tiers.md).
const DecodeKernels& avx2_decode_kernels(bool bf16) {
  static const DecodeKernels f32 = decode_kernels_of<Avx2>("avx2_decode_f32", "", false);
  static const DecodeKernels b16 = decode_kernels_of<Avx2>("", "avx2_decode_bf16", true);
  return bf16 ? b16 : f32;
}

}  // namespace sy::cpu
