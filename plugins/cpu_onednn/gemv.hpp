// Skinny matmul for decode: y [M, N] = x [M, K] · wᵀ with w stored [N, K] (Hugging Face
// linear weights, matmul's transpose_b), for M <= kGemvMaxRows. A decode step is bound by
// reading w once; these kernels stream each weight row contiguously, as stored (it already is
// the layout a row-dot streams, so there is nothing to pre-pack), and keep every output of a row
// block in registers. One implementation per tier (cpu_tier.hpp); each output is computed by
// one thread in an order that depends only on K, so results do not change with the threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_tier.hpp"
#include "scalar_math.hpp"

namespace sy::cpu {

inline constexpr int kGemvMaxRows = 8;

struct GemvArgs {
  const float* xf;     // x widened to f32 [M, K] (bf16 x: in the tier's lane order, below)
  const uint16_t* xb;  // x as bf16 [M, K] when the weights are bf16 (the AVX-512 bf16 dot)
  const void* w;       // [N, K], f32 or bf16
  void* y;             // [M, N]: f32, or bf16 (rounded to nearest even) for bf16 w unless f32_out
  int M;
  int64_t K, N;
  bool bf16;             // w and x are bf16
  bool f32_out = false;  // y is f32 even for bf16 w (the fused decode block's projections)
};

// Computes the rows [n0, n1) of y.
using GemvRowsFn = void (*)(const GemvArgs& a, int64_t n0, int64_t n1);

struct GemvTier {
  const char* name;
  GemvRowsFn rows;
  // Writes bf16 x widened to f32 in the lane order `rows` reads it in (f32 x is used as is);
  // nullptr when `rows` reads bf16 x itself (GemvArgs::xb, the AVX-512 bf16 dot).
  void (*widen_x)(const uint16_t* x, float* xf, int64_t count, int64_t K);
};

const GemvTier& gemv_tier(const TierChoice& tier);

// bf16 x widened in natural order (the portable and AVX-512 FMA tiers' widen_x).
void gemv_widen_natural(const uint16_t* x, float* xf, int64_t count, int64_t K);

namespace {
// Prefetches a row block's weights kGemvPrefetchBytes ahead, in address order, as many bytes per
// step as the step reads (a row block is contiguous, and so is a thread's range of blocks).
// The hardware prefetchers alone reach about 0.55 of this on Zen 5 (smollm2 weights, bf16):
// each row is a short stream of its own, read interleaved with the block's other rows.
inline constexpr int kGemvPrefetchBytes = 8192;

template <int kBytesPerStep>
struct WeightSweep {
  const char* p;
  explicit WeightSweep(const void* block)
      : p(static_cast<const char*>(block) + kGemvPrefetchBytes) {}
  void step() {
    for (int b = 0; b < kBytesPerStep; b += 64) __builtin_prefetch(p + b, 0, 3);
    p += kBytesPerStep;
  }
};

// y[m][n] = v in y's dtype. Internal linkage: the tier files compiled with wider instruction sets
// each get their own copy (scalar_math.hpp says why).
template <typename W>
inline void gemv_store(const GemvArgs& a, int m, int64_t n, float v) {
  if (sizeof(W) == 4 || a.f32_out)
    static_cast<float*>(a.y)[m * a.N + n] = v;
  else
    static_cast<uint16_t*>(a.y)[m * a.N + n] = from_f32<bf16_bits>(v);
}
}  // namespace

// Defined in gemv_avx2.cpp / gemv_avx512.cpp, compiled for those instruction sets; called
// only when the CPU has them.
const GemvTier& gemv_avx2();
const GemvTier& gemv_avx512(bool bf16_dot);

}  // namespace sy::cpu
