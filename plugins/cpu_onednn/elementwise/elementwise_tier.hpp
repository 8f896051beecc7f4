// elementwise/ — norms, rope, activations, add/mul, softmax, copy, embedding and slice, their
// loops compiled per tier (this header).
//
// The loops of cpu_onednn's elementwise, norm, softmax and rope kernels, compiled once per
// instruction-set tier (cpu_tier.hpp): the same source (elementwise_loops.hpp) built for
// baseline x86-64, AVX2 + FMA and AVX-512, so the compiler's vectorisation is as wide as the
// CPU allows. The kernels (ops_elementwise.cpp, ops_norm.cpp, ops_rope.cpp, fused_decode.cpp)
// own the shapes and the threading and call these per range of elements or rows.
//
// Every table is indexed by the element type: [0] f32, [1] bf16 (f32 math, rounded to nearest
// even on store). An output may be its input: every loop reads element i before writing it.
#pragma once

#include <cstdint>

#include "tier/cpu_tier.hpp"

namespace sy::cpu {

enum class Act { silu, gelu_erf, gelu_tanh };
enum class Bin { add, mul, silu_mul, gelu_erf_mul, gelu_tanh_mul };
inline constexpr int kActs = 3, kBins = 5;

// y[i] = f(x[i]) for i in [begin, end).
using FlatLoop = void (*)(const void* x, void* y, int64_t begin, int64_t end);
// c[i] = a[i] op b[i] for i in [begin, end).
using BinaryLoop = void (*)(const void* a, const void* b, void* c, int64_t begin, int64_t end);
// c[r][i] = a[r][i] op b[i] for rows [r0, r1) of n elements (b is one row).
using BinaryRowsLoop = void (*)(const void* a, const void* b, void* c, int64_t n, int64_t r0,
                                int64_t r1);
// Rows [r0, r1) of h elements: x / sqrt(mean(x²) + eps) · (w + offset); statistics in double.
using RmsNormLoop = void (*)(const void* x, const void* w, void* y, int64_t h, double eps,
                             float offset, int64_t r0, int64_t r1);
// Rows [r0, r1) of h elements: (x − mean) / sqrt(var + eps) · w + b; statistics in double.
using LayerNormLoop = void (*)(const void* x, const void* w, const void* b, void* y, int64_t h,
                               double eps, int64_t r0, int64_t r1);
// Rows [r0, r1) of n elements: e^{x − max} / Σ e^{x − max}, the sum in double.
using SoftmaxLoop = void (*)(const void* x, void* y, int64_t n, int64_t r0, int64_t r1);
// One head of d elements: the first `rotary` rotated by cs/sn (rotary/2 each; neox pairs
// (i, i + rotary/2), interleaved (2i, 2i + 1)), the rest copied.
using RopeHeadLoop = void (*)(const void* x, void* y, int64_t d, int64_t rotary, bool interleaved,
                              const float* cs, const float* sn);

struct ElementwiseTier {
  const char* name;
  FlatLoop unary[kActs][2];
  BinaryLoop binary[kBins][2];
  BinaryRowsLoop binary_rows[kBins][2];
  FlatLoop convert[2];  // [0] f32 -> bf16, [1] bf16 -> f32
  RmsNormLoop rms_norm[2];
  LayerNormLoop layer_norm[2];
  SoftmaxLoop softmax[2];
  RopeHeadLoop rope_head[2];
};

// The loops of a tier; the table for each is defined in elementwise_<tier>.cpp.
const ElementwiseTier& elementwise_tier(const TierChoice& tier);
const ElementwiseTier& elementwise_portable();
const ElementwiseTier& elementwise_avx2();
const ElementwiseTier& elementwise_avx512();

}  // namespace sy::cpu
