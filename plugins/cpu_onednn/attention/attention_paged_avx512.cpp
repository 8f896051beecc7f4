// The paged attention loops (attention_paged_loops.hpp) on the avx512 tier's lanes (AVX-512).
#include "attention/attention_paged_loops.hpp"

namespace sy::cpu {

const PagedAttentionTier& paged_attention_avx512() {
  static const PagedAttentionTier tier = make_paged_tier<Avx512Lanes>("avx512");
  return tier;
}

}  // namespace sy::cpu
