// The loops of the block-quantized kernels (matmul with quantized weights, embedding from
// quantized rows), compiled once per instruction-set tier like elementwise_tier.hpp: one source
// (quant_loops.hpp) built for baseline x86-64, AVX2 + FMA and AVX-512. Each block is dequantized
// with GGUF's formulas (quant_blocks.hpp) into a small f32 buffer in L1 and used from there, so
// the results are those of a reference that dequantizes to f32, up to the order of f32 sums.
#pragma once

#include <cstdint>

#include "cpu_tier.hpp"
#include "switchyard/vocabulary.h"

namespace sy::cpu {

struct QuantGemvArgs {
  sy_dtype wtype;    // a block-quantized dtype
  const uint8_t* w;  // [N, K] in blocks, rows back to back
  const float* x;    // [M, K] f32
  void* y;           // [M, N]: f32, or bf16 when y_bf16
  bool y_bf16;
  int M;  // <= kQuantGemvMaxRows
  int64_t K, N;
  const float* xsum;  // [M][K / 32]: the sums of x over each 32 elements (the q4 offsets' term)
};

inline constexpr int kQuantGemvMaxRows = 8;

struct QuantTier {
  const char* name;
  // Rows [r0, r1) of w ([rows, K] in blocks of wtype) dequantized to f32, row r at
  // dst + (r − r0)·K.
  void (*dequant_rows)(sy_dtype wtype, const uint8_t* w, int64_t K, int64_t r0, int64_t r1,
                       float* dst);
  // The rows [n0, n1) of y = x · wᵀ. Each output is summed in an order that depends only on K.
  void (*gemv_rows)(const QuantGemvArgs& a, int64_t n0, int64_t n1);
};

const QuantTier& quant_tier(const TierChoice& tier);
const QuantTier& quant_portable();
const QuantTier& quant_avx2();
const QuantTier& quant_avx512();

}  // namespace sy::cpu
