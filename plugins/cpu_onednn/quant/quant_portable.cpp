// The block-quantized loops (quant_loops.hpp) compiled for baseline x86-64, and the choice of
// tier.
#include "quant/quant_loops.hpp"

namespace sy::cpu {

const QuantTier& quant_portable() {
  static const QuantTier tier = make_quant_tier("portable");
  return tier;
}

const QuantTier& quant_tier(const TierChoice& tier) {
  switch (tier.tier) {
    case CpuTier::amx:
    case CpuTier::avx512: return quant_avx512();
    case CpuTier::avx2: return quant_avx2();
    default: return quant_portable();
  }
}

}  // namespace sy::cpu
