// The paged attention loops (attention_paged_loops.hpp) on the avx2 tier's lanes (AVX2 + FMA).
#include "attention/attention_paged_loops.hpp"

namespace sy::cpu {

const PagedAttentionTier& paged_attention_avx2() {
  static const PagedAttentionTier tier = make_paged_tier<Avx2Lanes>("avx2");
  return tier;
}

}  // namespace sy::cpu
