// The tiny llama's weights for a Model (executor/weight_loader.hpp): llama_reference.hpp's
// hashed values, written in the value's dtype (f32, or bf16 rounded to nearest even).
#pragma once

#include <optional>

#include "core/errors/error.hpp"
#include "core/graph/graph.hpp"
#include "support/llama_reference.hpp"

namespace sy::test {

inline std::optional<Error> load_hashed_weights(const Value& v, void* dst) {
  const int64_t n = v.bytes() / int64_t(sy_dtype_size(v.dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float x = float(hashed_weight(v.name, i));
    if (v.dtype == SY_DTYPE_F32)
      static_cast<float*>(dst)[i] = x;
    else if (v.dtype == SY_DTYPE_BF16)
      static_cast<uint16_t*>(dst)[i] = sy_f32_to_bf16(x);
    else
      return Error(Errc::bad_weights, "test weights are f32 or bf16");
  }
  return std::nullopt;
}

}  // namespace sy::test
