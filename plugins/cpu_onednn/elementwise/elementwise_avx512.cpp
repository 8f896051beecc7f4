// The elementwise loops (elementwise_loops.hpp) compiled for the avx512 tier. Only this file's
// flags allow its instructions; elementwise_tier() calls it only on a CPU that has them.
#include "elementwise/elementwise_loops.hpp"

namespace sy::cpu {

const ElementwiseTier& elementwise_avx512() {
  static const ElementwiseTier tier = make_elementwise_tier("avx512");
  return tier;
}

}  // namespace sy::cpu
