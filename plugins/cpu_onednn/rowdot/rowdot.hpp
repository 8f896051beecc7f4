// rowdot/ — the matmul kernels (this header: exact; rowdot_q8.hpp: activations quantized to
// blocks) per tier, and the matmul and mixture-of-experts ops built on them.
//
// matmul y [M, N] = x [M, K] · wᵀ with w stored [N, K] (Hugging Face linear weights, matmul's
// transpose_b), batch-invariant: every output element is computed by the same arithmetic
// whatever M is, whichever rows share its tile and however the work is split over threads, so a
// row's result is bit-identical alone or in a batch of any size, as a decode token or as a row
// of a prefill (what makes a server's answers reproducible; docs/cpu-tiers.md).
//
// The arithmetic of one element, per tier, with L lanes (avx512: 16; avx2 and portable: 8):
// the weights, dequantized (block-quantized: GGUF's formulas) or widened (bf16) to f32, are
// multiplied with x in chunks of L elements along K, accumulating lane by lane, chunk after
// chunk, into one accumulator with a fused multiply-add (portable: multiply, round, then add);
// the lanes are then summed by one fixed tree (avx2, portable: halving, L/2, L/4, …, 1; avx512:
// lanes i and i + 8, then adjacent pairs, pairs of pairs and the two quads: simd_lanes.hpp's
// sum_each, which sums 16 accumulators at once). bf16 weights with bf16 x on a CPU with
// AVX512-BF16 use vdpbf16ps instead, over chunks of 32 (pairs of products per lane). Tails of K
// are zeros.
//
// One implementation per tier, each a family of register tiles (RN weight rows × RM x rows) over
// the same element arithmetic: decode-sized M dequantizes each block in registers and uses it at
// once; larger M dequantizes a panel of weight rows into L1 once per block of x rows and tiles
// over it (the values a register and a panel hold are the same).
#pragma once

#include <cstdint>

#include "switchyard/vocabulary.h"
#include "tier/cpu_tier.hpp"

namespace sy::cpu {

struct RowdotArgs {
  sy_dtype wtype;      // f32, bf16 or block-quantized: w's dtype
  const void* w;       // [N, K], rows back to back (in blocks for a quantized dtype)
  const float* xf;     // [M, K] x as f32 (bf16 x widened), when the tier reads f32
  const uint16_t* xb;  // [M, K] x as bf16, when the tier reads bf16 (reads_bf16_x)
  void* y;             // [M, N]
  bool y_bf16;         // y is bf16 (rounded to nearest even), else f32
  int64_t M, K, N;
};

struct RowdotTier {
  const char* name;
  // y's columns [n0, n1) (every row of x). Thread-safe: one call per thread on disjoint ranges.
  void (*columns)(const RowdotArgs& a, int64_t n0, int64_t n1);
  // Whether `columns` reads bf16 x itself (xb) for these weights; else it reads xf.
  bool (*reads_bf16_x)(sy_dtype wtype, bool x_bf16);
  // Weight rows a thread's range should be a multiple of (the widest tile's).
  int64_t row_multiple;
};

const RowdotTier& rowdot_tier(const TierChoice& tier);
// Every column of `a`, split over up to `threads` OpenMP threads in ranges of whole tiles (one
// thread when the work is small). Each element is computed by one thread, so the result does
// not depend on the split.
void rowdot_run(const RowdotTier& tier, const RowdotArgs& a, int threads);
const RowdotTier& rowdot_avx512(bool bf16_dot);
// bf16 weights and x on AMX-BF16 tiles at every M; the rest as rowdot_avx512(true).
const RowdotTier& rowdot_amx();
const RowdotTier& rowdot_avx2();
const RowdotTier& rowdot_portable();

}  // namespace sy::cpu
