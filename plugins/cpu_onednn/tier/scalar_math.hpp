// Scalar math of cpu_onednn's kernels: bf16 widening and rounding, and the exp / silu / gelu
// approximations, branch-free so loops over them vectorise.
//
// Everything here has internal linkage. The tier files (*_avx2.cpp, *_avx512.cpp) are compiled
// with wider instruction sets; were these inline functions shared, the linker could keep an
// AVX-512-compiled copy for the whole plugin, which would fault on an AVX2 CPU. With internal
// linkage every file gets its own copy. Headers included by a tier file must follow the same
// rule (rowdot_lanes.hpp, decode_tiles.hpp, elementwise_loops.hpp do).
#pragma once

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace sy::cpu {

using bf16_bits = uint16_t;  // a bf16 element as stored

namespace {

// Loads widen to f32; stores round to nearest even (NaN stays NaN). Branch-free so loops
// over them vectorise.
inline float to_f32(float x) {
  return x;
}
inline float to_f32(bf16_bits x) {
  return std::bit_cast<float>(static_cast<uint32_t>(x) << 16);
}

template <typename T>
inline T from_f32(float f);
template <>
inline float from_f32<float>(float f) {
  return f;
}
template <>
inline bf16_bits from_f32<bf16_bits>(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet = (u >> 16) | 0x40u;
  return static_cast<bf16_bits>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

// IEEE half (GGUF's scales) to f32, exactly: normals, subnormals, infinities and NaN. A tier
// file compiled with F16C (avx2 and up) converts with the instruction: the same value in one
// instruction instead of a dozen with branches, which per block of 32 weights was the cost of a
// quantized decode (a signalling NaN comes out quiet, still a NaN).
inline float half_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#endif
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    // Subnormal: m·2^-24, exact in f32.
    float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// cond ? a : b on bit masks: GCC keeps a float select feeding arithmetic as a branch
// under the default -ftrapping-math, which stops vectorisation; integer masks do not.
inline float select_f32(bool cond, float a, float b) {
  uint32_t m = 0u - static_cast<uint32_t>(cond);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// e^x within ~2 ulp (Cephes' expf polynomial after range reduction by ln 2) on
// [-87.3, 88.3]: exactly 0 below (e.g. -inf), +inf above (a little early: e^88.72 is the
// largest finite f32), NaN stays NaN.
inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float c = select_f32(x < -87.3f, -87.3f, x);
  c = select_f32(c > 88.3f, 88.3f, c);
  float n = (c * kLog2e + kRound) - kRound;
  float r = c - n * kLn2Hi - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  float e = select_f32(x > 88.3f, std::numeric_limits<float>::infinity(), p * scale);
  return select_f32(x < -87.3f, 0.0f, e);
}

// Below these the true value is smaller than 1e-36 in magnitude: −0, also for −inf
// (where the formulas would give NaN).
constexpr float kSiluZeroBelow = -88.0f, kGeluZeroBelow = -16.0f;

inline float silu_f32(float x) {
  return select_f32(x < kSiluZeroBelow, -0.0f, x / (1.0f + exp_f32(-x)));
}

// 0.5·x·(1 + erf(x/√2)), with 1 + erf(z) = erfc(−z) so the negative tail keeps its
// relative precision. erfc(|z|) by the Chebyshev fit of Numerical Recipes' erfcc
// (fractional error < 1.2e-7 everywhere); 1 + erf(z) = 2 − erfc(|z|) for z >= 0.
inline float gelu_erf_f32(float x) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  float z = x * kInvSqrt2;
  float a = std::abs(z);
  float t = 1.0f / (1.0f + 0.5f * a);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  float erfc_a = t * exp_f32(p - a * a);
  float sign = select_f32(z < 0.0f, -1.0f, 1.0f);
  float one_plus_erf = (1.0f + sign) - sign * erfc_a;  // erfc(|z|) below 0, 2 − erfc(|z|) above
  return select_f32(x < kGeluZeroBelow, -0.0f, 0.5f * x * one_plus_erf);
}

// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), with 1 + tanh(y) = 2 / (1 + e^{−2y}): no
// cancellation on either side.
inline float gelu_tanh_f32(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  float y = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  float one_plus_tanh = 2.0f / (1.0f + exp_f32(-2.0f * y));
  return select_f32(x < kGeluZeroBelow, -0.0f, 0.5f * x * one_plus_tanh);
}

}  // namespace
}  // namespace sy::cpu
