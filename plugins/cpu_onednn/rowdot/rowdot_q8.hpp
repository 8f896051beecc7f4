// matmul with activations quantized to 16-bit blocks (the `activation_q16` numerics,
// docs/numerics.md): y [M, N] = x [M, K] · wᵀ for block-quantized w [N, K], computed on integers
// as llama.cpp computes its q8 products, with activations 254 times finer. A kernel that uses
// this declares SY_FEATURE_ACTIVATION_Q16, and the planner gives it an op under `--numerics
// auto` (the default) and `fast`.
//
// The activations: every row of x (f32, or bf16 widened) in blocks of 32, each
//   d = max|x| / 32258 (127 · 254),  Q = round-half-even(x · (1/d)) in [−32258, 32258] (all 0
//   when d = 0; a NaN makes d NaN, so it reaches the result),  s = d · ΣQ,
// all in f32. Q is kept as itself (16 bits, for pmaddwd and vpdpwssd) and as two signed 8-bit
// digits, Q = 254·hi + lo with hi and lo in [−127, 127], for the int8 products of AMX-INT8 and
// the avx2/avx512 4-row remainder loops (how a tier splits a Q whose lo is ±127 does not
// matter: the sums below are the same integers).
//
// Why not llama.cpp's 8-bit activations (d = max|x| / 127): on the real SmolLM2 they change the
// top-1 prediction at 4 % of positions (docs/numerics.md); 16-bit blocks change almost none, and
// decode still reads the same weight bytes, which is what bounds it.
//
// The product, per weight row n and row of x, block by block of 32 activations in order: the
// weights' integers w (signed: q8_0, q4_0 − 8, q5_0 − 16, q6_k − 32; unsigned: q4_1, q5_1, q4_k)
// times Q, summed exactly in int32 (w widened to 16 bits times Q on pmaddwd: AVX2's, and SSE2's
// on the portable tier; AVX512-VNNI's vpdpwssd; 254·Σw·hi + Σw·lo on AMX-INT8's tiles: the same
// integers; |Σ| < 32·255·32258 < 2³¹), then
// acc = fma(float(Σ), w_scale · d, acc) (q6_k: the two halves of 16, each with its scale, in
// turn) and, for a weight offset (q4_1's m, q4_k's −dmin·m), off = fma(offset, s, off); the
// result is acc + off. That scalar arithmetic is the same on every path of a tier (one row of x
// or many, vectors or tiles), so a row's result does not depend on the other rows of the step:
// batch-invariant as the exact kernels are (rowdot.hpp). The portable tier multiplies and adds
// with two roundings (baseline x86-64 has no FMA).
#pragma once

#include <cstdint>

#include "rowdot/rowdot.hpp"

namespace sy::cpu {

// The largest |Q|, and the weight of the high digit.
inline constexpr int kQ16Max = 127 * 254;
inline constexpr int kQ16Radix = 254;

struct Q16Block {
  int16_t q[32];  // Q itself: AVX2's pmaddwd multiplies it with 16-bit weights in one step
  int8_t hi[32];  // Q = kQ16Radix · hi + lo: the int8 dot products' digits
  int8_t lo[32];
  float d;              // the scale: x ≈ d · Q
  float s;              // d · ΣQ: the block's sum, for a weight offset
  int32_t sum_half[2];  // ΣQ of elements 0-15 and 16-31 (the vnni form's bias for signed w)
};

// The packed layouts "8 rows interleaved" of q4_0, q4_1, q8_0, iq4_nl, q5_0 and q5_1 (a unit of
// one block of 32), and of q4_k, q5_k, iq4_xs and q6_k (a unit of one super-block of 256)
// (weight_layout.hpp says what they are).
inline constexpr uint32_t kLayoutQ4_0Rows8 = 1, kLayoutQ4_1Rows8 = 2, kLayoutQ8_0Rows8 = 3,
                          kLayoutIq4_NLRows8 = 4, kLayoutQ5_0Rows8 = 5, kLayoutQ5_1Rows8 = 6,
                          kLayoutQ4_KRows8 = 7, kLayoutQ5_KRows8 = 8, kLayoutIq4_XSRows8 = 9,
                          kLayoutQ6_KRows8 = 10;

// A packed layout's unit: `blocks` blocks of 32 of 8 rows; `stored_bytes` of one row's unit as
// stored, `packed_bytes` of the 8 rows' unit packed. All 0 for a layout that names none.
struct Rows8Unit {
  int64_t blocks = 0, stored_bytes = 0, packed_bytes = 0;
};

// (Defined in weight_layout.cpp, a file of the base flags, so a tier file may call them.)
Rows8Unit rows8_unit(uint32_t layout);

// One unit of a group of 8 packed rows (`packed`, packed_bytes long) back into the 8 rows' stored
// units at `stored`, stored_bytes apart: for a reader of the stored layout (the amx tier's tiles)
// on weights packed for its other forms. Not for q6_k, which the tiles never take.
void unpack_rows8_unit(uint32_t layout, const uint8_t* packed, uint8_t* stored);

struct RowdotQ8Args {
  sy_dtype wtype;
  const void* w;       // [N, K] in blocks of wtype
  const Q16Block* xq;  // [M, K/32]
  const void* xt;      // x in the tier's tile layout (RowdotQ8Tier::tile_x), or nullptr
  void* y;             // [M, N]
  bool y_bf16;
  int64_t M, K, N;
  uint32_t layout;  // w's: 0 as stored, else a packed layout (weight_layout.hpp)
};

// Bytes of x in the amx tier's tile layout: per 16 rows and block of 32, the 16 rows' high
// digits in 4-byte groups (AMX-INT8's B operand, 512 bytes), then their low digits (512), then
// their 16 d and 16 s (128 bytes).
inline constexpr int64_t kQ16TileBlockBytes = 1152;
inline int64_t q16_tile_x_bytes(int64_t M, int64_t K) {
  return (M + 15) / 16 * (K / 32) * kQ16TileBlockBytes;
}

struct RowdotQ8Tier {
  const char* name;
  // Rows [m0, m1) of x (f32 xf, or bf16 xb; K elements each, K a multiple of 32) into K/32
  // blocks per row at out. A NaN in a block makes its d NaN, so it reaches the result.
  void (*quantize)(const float* xf, const uint16_t* xb, int64_t K, int64_t m0, int64_t m1,
                   Q16Block* out);
  // y's columns [n0, n1), every row. Thread-safe on disjoint ranges.
  void (*columns)(const RowdotQ8Args& a, int64_t n0, int64_t n1);
  // Optional (nullptr: the tier reads xq only): rows [16·t0, 16·t1) of a.xq into the tile layout
  // at out (q16_tile_x_bytes), for M >= tile_min_rows; columns then reads it from a.xt.
  void (*tile_x)(const RowdotQ8Args& a, int64_t t0, int64_t t1, void* out);
  int64_t tile_min_rows;
  // Whether columns reads the weights of the "8 rows interleaved" layouts packed
  // (weight_layout.hpp).
  bool reads_rows8 = false;
};

const RowdotQ8Tier& rowdot_q8_tier(const TierChoice& tier);
const RowdotQ8Tier& rowdot_q8_vnni();  // AVX512-VNNI on 256-bit vectors
const RowdotQ8Tier& rowdot_q8_amx();   // AMX-INT8 tiles for many rows of x, else as vnni
const RowdotQ8Tier& rowdot_q8_avx2();
const RowdotQ8Tier& rowdot_q8_portable();

}  // namespace sy::cpu
