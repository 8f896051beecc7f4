// quant/ — block-quantized weights: GGUF's block formats (quant_blocks.hpp), their
// dequantization per tier (this header) and the quantized embedding and matmul glue.
//
// Dequantization of block-quantized rows (embedding from quantized rows; the panels of the avx2
// and portable matmul tiers, rowdot_lanes.hpp), compiled once per instruction-set tier like
// elementwise_tier.hpp: one source (quant_loops.hpp) built for baseline x86-64, AVX2 + FMA and
// AVX-512, with GGUF's formulas (quant_blocks.hpp).
#pragma once

#include <cstdint>

#include "tier/cpu_tier.hpp"
#include "switchyard/vocabulary.h"

namespace sy::cpu {

struct QuantTier {
  const char* name;
  // Rows [r0, r1) of w ([rows, K] in blocks of wtype) dequantized to f32, row r at
  // dst + (r − r0)·K.
  void (*dequant_rows)(sy_dtype wtype, const uint8_t* w, int64_t K, int64_t r0, int64_t r1,
                       float* dst);
};

const QuantTier& quant_tier(const TierChoice& tier);
const QuantTier& quant_portable();
const QuantTier& quant_avx2();
const QuantTier& quant_avx512();

}  // namespace sy::cpu
