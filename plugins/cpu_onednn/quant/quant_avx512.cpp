// The block-quantized loops (quant_loops.hpp) compiled for the avx512 tier. Only this file's flags
// allow its instructions; quant_tier() calls it only on a CPU that has them.
#include "quant/quant_loops.hpp"

namespace sy::cpu {

const QuantTier& quant_avx512() {
  static const QuantTier tier = make_quant_tier("avx512");
  return tier;
}

}  // namespace sy::cpu
