// The elementwise loops (elementwise_loops.hpp) compiled for baseline x86-64, and the choice of
// tier.
#include "elementwise/elementwise_loops.hpp"

namespace sy::cpu {

const ElementwiseTier& elementwise_portable() {
  static const ElementwiseTier tier = make_elementwise_tier("portable");
  return tier;
}

const ElementwiseTier& elementwise_tier(const TierChoice& tier) {
  switch (tier.tier) {
    case CpuTier::amx:
    case CpuTier::avx512: return elementwise_avx512();
    case CpuTier::avx2: return elementwise_avx2();
    default: return elementwise_portable();
  }
}

}  // namespace sy::cpu
