// The packed weight layouts of this plugin (ABI 1.10, sy_tensor_desc.layout): which matmul_q16
// weights the active tier reads packed, and the packing itself. Packing moves bytes, never a
// value, and the packed kernels compute each output with the stored forms' arithmetic, so a
// result is the same bit for bit either way (conformance checks it).
//
// "8 rows interleaved" (kLayoutQ4_0Rows8 … kLayoutQ6_KRows8 in rowdot_q8.hpp): weights [N, K]
// (N a multiple of 8) as groups of 8 rows, each group unit after unit along K.
//
// q4_0, q4_1, q8_0, iq4_nl, q5_0 and q5_1: a unit is one block of 32 (8 stored blocks' bytes:
// 144, 160, 272, 144, 176 and 192; iq4_nl's block is q4_0's, its nibbles indices into a table):
//   - the 8 rows' f16 scales, row r's at bytes 2r and 2r + 1; q4_1's and q5_1's 8 f16 offsets
//     after them;
//   - q5_0 and q5_1: the 8 rows' fifth bits, 4 bytes each (row r's at 4r), the even elements'
//     in the low 16 bits (bit j: element 2j's) and the odd elements' in the high 16, so that a
//     16-bit shift by j puts the bits of chunk j's pairs (below) at bit 0 of each half;
//   - the quants in chunks of 16 bytes (8 of nibbles, q8_0's 16 of bytes), chunk j holding
//     quant bytes 2j and 2j + 1 of each row, row r's at 2r and 2r + 1.
// q4_k, q5_k, iq4_xs and q6_k: a unit is one super-block of 256 (8 rows: 1184, 1440, 1104 and
// 1680 bytes against 1152, 1408, 1088 and 1680 stored): the 8 rows' f16 d (and q4_k's and q5_k's
// dmin), then per sub-block of 32 the 8 rows' 6-bit scales as bytes (q4_k, q5_k: scales, then
// mins; iq4_xs: ls − 32, signed; q6_k: its two scales of 16 elements), q5_k's fifth bits as
// q5_0's, q6_k's high 2 bits (elements 0-15's, then 16-31's, 8 rows × 32 bits, element 2i's at
// bit 2i and 2i + 1's at 16 + 2i), and the low 4 bits in chunks as q4_0's. Each sub-block's
// nibbles are reordered as q4_0 orders them (byte i: element i low, i + 16 high), so that every
// type's chunks widen alike; the scales are decoded once at load, not per row and step.
// Widened to 16 bits, a chunk holds every row's pair of elements in its own 32-bit lane:
// nibble chunk j's low nibbles are elements (2j, 2j + 1), its high ones (16 + 2j, 17 + 2j); q8_0's
// chunk j elements (2j, 2j + 1). That is what pmaddwd multiplies with a broadcast pair of x, with
// no shuffle and no horizontal sum (llama.cpp's repacking for AVX2, ggml-cpu/repack.cpp, arranges
// its blocks to the same end). The stored layout spends a third of the decode loop's
// instructions on those (rowdot_q8_rows8_avx2.hpp).
#pragma once

#include <cstdint>

#include "cxx_edge/cxx_edge.hpp"
#include "rowdot/rowdot_q8.hpp"

namespace sy::cpu {

// The layout the active tier's matmul_q16 wants for weights of `wtype` [N, K]: id 0 (as
// stored) unless its columns read a packed form of that type and the shape allows it.
sy::edge::WeightLayout q16_weight_layout(sy_dtype wtype, int64_t N, int64_t K);

// Packs `src` ([N, K] as stored) into `layout` at dst; false (nothing written) when `layout`
// is not one q16_weight_layout gives for this weight or `dst_bytes` is not its size.
bool pack_q16_weight(uint32_t layout, sy_dtype wtype, int64_t N, int64_t K, const void* src,
                     void* dst, uint64_t dst_bytes);

}  // namespace sy::cpu
