// Tensors as doubles: every element of a float, integer or block-quantized tensor read into a
// double, and doubles written back in a tensor's dtype (bf16 and f16 rounded to nearest even).
// The block formulas are GGUF's (docs/abi.md §5a), written here element by element.
#pragma once

#include <cstdint>
#include <vector>

#include "switchyard/vocabulary.h"

namespace sy::ref {

// The `count` elements at `data` of dtype `dt` (plain or block-quantized; a quantized tensor's
// rows are whole blocks, so its elements can be read from its start).
std::vector<double> read(const void* data, sy_dtype dt, int64_t count);

// `values` into `data` as dtype `dt` (f32, f16, bf16, i32, i64).
void write(void* data, sy_dtype dt, const std::vector<double>& values);

// One value of a plain dtype into element `index` of `data`.
void write_one(void* data, sy_dtype dt, int64_t index, double value);

}  // namespace sy::ref
