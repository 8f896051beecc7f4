// Scalar bf16 helpers for the files compiled with wider instruction sets (*_avx2.cpp,
// *_avx512.cpp). Everything here has internal linkage: each such file gets its own copy, so the
// linker can never keep an AVX-512-compiled body of a shared inline function for the whole
// plugin (which would fault on an AVX2 CPU). Those files include no other header with inline
// code of the plugin's but gemv.hpp, whose inline code is internal too (and uses this).
#pragma once

#include <cstdint>
#include <cstring>

namespace sy::cpu {
namespace {

inline float scalar_widen(float x) {
  return x;
}
inline float scalar_widen(uint16_t x) {
  uint32_t u = uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint16_t scalar_round_bf16(float f) {  // to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace
}  // namespace sy::cpu
