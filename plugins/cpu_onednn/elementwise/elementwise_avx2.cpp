// The elementwise loops (elementwise_loops.hpp) compiled for the avx2 tier. Only this file's
// flags allow its instructions; elementwise_tier() calls it only on a CPU that has them.
#include "elementwise/elementwise_loops.hpp"

namespace sy::cpu {

const ElementwiseTier& elementwise_avx2() {
  static const ElementwiseTier tier = make_elementwise_tier("avx2");
  return tier;
}

}  // namespace sy::cpu
