#include "rowdot/weight_layout.hpp"

#include <cstring>

#include "tier/cpu_tier.hpp"

namespace sy::cpu {
namespace {

constexpr int64_t kQ4_0Block = 18;  // f16 scale + 16 nibble bytes

void pack_q4_0_rows8(const uint8_t* src, uint8_t* dst, int64_t N, int64_t K) {
  const int64_t blocks = K / 32, row_bytes = blocks * kQ4_0Block;
  for (int64_t g = 0; g < N / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* out = dst + (g * blocks + b) * 8 * kQ4_0Block;
      for (int r = 0; r < 8; ++r) {
        const uint8_t* in = src + (8 * g + r) * row_bytes + b * kQ4_0Block;
        std::memcpy(out + 2 * r, in, 2);
        for (int j = 0; j < 8; ++j) std::memcpy(out + 16 + 16 * j + 2 * r, in + 2 + 2 * j, 2);
      }
    }
}

}  // namespace

sy::edge::WeightLayout q16_weight_layout(sy_dtype wtype, int64_t N, int64_t K) {
  const RowdotQ8Tier& tier = rowdot_q8_tier(active_tier());
  if (wtype != SY_DTYPE_Q4_0 || !tier.reads_q4_0_rows8 || N <= 0 || N % 8 || K <= 0 || K % 32)
    return {};
  return {kLayoutQ4_0Rows8, uint64_t(N) * uint64_t(K / 32) * kQ4_0Block,
          "q4_0, 8 rows interleaved"};
}

bool pack_q16_weight(uint32_t layout, sy_dtype wtype, int64_t N, int64_t K, const void* src,
                     void* dst, uint64_t dst_bytes) {
  const sy::edge::WeightLayout want = q16_weight_layout(wtype, N, K);
  if (layout == 0 || want.id != layout || want.bytes != dst_bytes) return false;
  pack_q4_0_rows8(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), N, K);
  return true;
}

}  // namespace sy::cpu
