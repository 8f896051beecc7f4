// The paged attention loops (attention_paged_loops.hpp) on the portable tier's lanes (baseline
// x86-64).
#include "attention/attention_paged_loops.hpp"

namespace sy::cpu {

const PagedAttentionTier& paged_attention_portable() {
  static const PagedAttentionTier tier = make_paged_tier<PortableLanes>("portable");
  return tier;
}

const PagedAttentionTier& paged_attention_tier(const TierChoice& tier,
                                               const PagedAttentionArgs& a) {
  switch (tier.tier) {
    case CpuTier::amx:
      return paged_amx_tiles_take(a) ? paged_attention_amx() : paged_attention_avx512();
    case CpuTier::avx512: return paged_attention_avx512();
    case CpuTier::avx2: return paged_attention_avx2();
    default: return paged_attention_portable();
  }
}

}  // namespace sy::cpu
