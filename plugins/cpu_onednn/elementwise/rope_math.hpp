// Rotary position embedding math shared by the rope kernel (ops_rope.cpp) and the fused
// decode block (fused_decode.cpp), so both rotate exactly alike: the frequencies and cos/sin
// here, the rotation itself in the tier's loops (elementwise_tier.hpp's rope_head).
//
// Frequencies θ^(−2i/R) for i < R/2 (R = rotary_dim), or a scaled rope's own table (the op's
// inv_freq input: linear, llama3, yarn); the first R dims of a head are rotated, the rest pass
// through. neox rotates the pairs (i, i + R/2), interleaved (2i, 2i + 1). Angles are
// position · frequency in double, so large positions keep their precision; cos and sin are then
// multiplied by the attention factor (yarn's; 1 otherwise).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace sy::cpu {

// θ^(−2i/R) for i < R/2.
inline std::vector<double> rope_inv_freq(double theta, int64_t rotary) {
  std::vector<double> inv_freq(static_cast<size_t>(rotary / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary));
  return inv_freq;
}

// The table of a scaled rope, widened to double into `inv_freq` (sized R/2).
inline void rope_table(const float* table, std::vector<double>& inv_freq) {
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = static_cast<double>(table[i]);
}

// cs[i] = factor · cos(position · inv_freq[i]), sn[i] = factor · sin(…) for i < half.
inline void rope_cos_sin(double position, const double* inv_freq, int64_t half, double factor,
                         float* cs, float* sn) {
  for (int64_t i = 0; i < half; ++i) {
    const double angle = position * inv_freq[i];
    cs[i] = static_cast<float>(factor * std::cos(angle));
    sn[i] = static_cast<float>(factor * std::sin(angle));
  }
}

}  // namespace sy::cpu
